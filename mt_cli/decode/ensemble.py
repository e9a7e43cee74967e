"""Decode-time ensembles: several Transformers combined per step, log-linearly.

Each step the ensemble's log-probability is log_softmax(sum_m w_m * log_softmax(logits_m)): the
weighted mean of the members' log-probabilities, renormalised (Marian's and Sockeye's
combination; weights default to equal and are normalised to sum to 1). Each member keeps its own
encoder memory and KV cache, so members may differ in architecture (layers, widths, heads); they
must share their vocabularies (the engine checks that the tokenizers are the same files).

An ``Ensemble`` is a ``hypotheses.Decoder``: greedy, beam and sampling search, forced decoding and
attention run on it unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from torch import Tensor, nn

from mt_cli.model.cache import DecoderCache
from mt_cli.model.transformer import Transformer


@dataclass
class EnsembleCache:
    """One ``DecoderCache`` per member; every operation applies to each of them alike."""

    members: list[DecoderCache]

    def expand_beams(self, beams: int) -> EnsembleCache:
        return EnsembleCache([cache.expand_beams(beams) for cache in self.members])

    def reorder(self, index: Tensor) -> EnsembleCache:
        return EnsembleCache([cache.reorder(index) for cache in self.members])

    def select(self, index: Tensor) -> EnsembleCache:
        return EnsembleCache([cache.select(index) for cache in self.members])


class Ensemble(nn.Module):
    """Members (Transformers sharing their vocabularies) with normalised positive weights.

    ``step`` and ``decode`` return log-probabilities, fp32; ``max_positions`` is the members'
    smallest. Attention (``step(..., return_attention=True)``) is the weighted mean of the
    members' attention of the same decoder layer index (plain mean with equal weights, as
    fairseq's ensembles average their members' alignment attention).
    """

    def __init__(self, members: Sequence[Transformer], weights: Sequence[float] | None = None) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one member")
        vocabularies = {(m.src_vocab_size, m.tgt_vocab_size) for m in members}
        if len(vocabularies) > 1:
            sizes = ", ".join(f"{s}/{t}" for s, t in ((m.src_vocab_size, m.tgt_vocab_size) for m in members))
            raise ValueError(f"ensemble members must share their vocabularies; source/target sizes: {sizes}")
        weights = [1.0] * len(members) if weights is None else [float(w) for w in weights]
        if len(weights) != len(members):
            raise ValueError(f"{len(members)} ensemble members but {len(weights)} weights")
        if not all(0.0 < w < math.inf for w in weights):
            raise ValueError(f"ensemble weights must be positive numbers, not {weights}")
        self.members = nn.ModuleList(members)
        self.weights = tuple(w / sum(weights) for w in weights)
        self.src_vocab_size, self.tgt_vocab_size = vocabularies.pop()
        self.max_positions = min(m.max_positions for m in members)

    def _members(self) -> list[Transformer]:
        return cast("list[Transformer]", list(self.members))

    def encode(self, src: Tensor, src_mask: Tensor) -> list[Tensor]:
        """src (B, S), src_mask (B, 1, 1, S) -> each member's memory (B, S, D_m)."""
        return [m.encode(src, src_mask) for m in self._members()]

    def start_cache(self, memory: list[Tensor], src_mask: Tensor) -> EnsembleCache:
        pairs = zip(self._members(), memory, strict=True)
        return EnsembleCache([member.start_cache(mem, src_mask) for member, mem in pairs])

    def step(
        self,
        tokens: Tensor,
        cache: EnsembleCache,
        return_attention: bool = False,
        attention_layer: int | None = None,
    ) -> tuple[Tensor, EnsembleCache, Tensor | None]:
        """Feed tokens (N,) -> combined scores (N, V) fp32 whose log_softmax is the ensemble's
        log-probability (the ``Decoder`` contract: the searches normalise where they need it,
        greedy search never), the caches and, if asked, the weighted mean of the members'
        cross-attention (N, S)."""
        combined: Tensor | None = None
        attention: Tensor | None = None
        caches = []
        for weight, member, own in zip(self.weights, self._members(), cache.members, strict=True):
            logits, own, attended = member.step(tokens, own, return_attention, attention_layer)  # (N, V)
            caches.append(own)
            log_probs = logits.log_softmax(-1)  # (N, V)
            combined = log_probs.mul_(weight) if combined is None else combined.add_(log_probs, alpha=weight)
            if attended is not None:
                share = weight * attended  # (N, S)
                attention = share if attention is None else attention + share
        assert combined is not None  # at least one member
        return combined, EnsembleCache(caches), attention

    def decode(self, tgt_in: Tensor, memory: list[Tensor], src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        """Teacher-forced combined log-probabilities (B, T, V), fp32; ``step`` position by position."""
        combined: Tensor | None = None
        for weight, member, mem in zip(self.weights, self._members(), memory, strict=True):
            logits = member.decode(tgt_in, mem, src_mask, tgt_mask).float()  # (B, T, V)
            part = weight * logits.log_softmax(-1)  # (B, T, V)
            combined = part if combined is None else combined + part
        assert combined is not None  # at least one member
        return combined.log_softmax(-1)

    def forward(self, src: Tensor, tgt_in: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        """As ``Transformer.forward``, with log-probabilities (B, T, V) for logits."""
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)
