"""The decoder's key/value cache for incremental decoding (greedy and beam search).

Shapes: B sources, G hypotheses (beams) per source, H heads, t decoded positions, S source
positions, Dh head width. Self-attention history has one row per hypothesis, (B*G, H, t, Dh);
cross-attention keys/values have one row per source, (B, H, S, Dh), shared by its beams.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class LayerCache:
    """One decoder layer's keys/values: self-attention buffers (B*G, H, capacity, Dh), of which
    the first ``DecoderCache.length`` positions hold the history, and cross (B, H, S, Dh)."""

    self_k: Tensor
    self_v: Tensor
    cross_k: Tensor
    cross_v: Tensor


@dataclass
class DecoderCache:
    """Incremental-decoding state: per-layer caches, the source mask (B, 1, 1, S), the number of
    target positions already decoded (the position of the next step) and the number of
    hypotheses (beams) per source.

    Rows are hypotheses, grouped by source: row = source * beams + beam. Self-attention history
    has one row per hypothesis; cross-attention k/v, computed once per source when the cache is
    created, have one row per source and are shared by its beams.

    ``reorder`` and ``select`` return a new cache and leave this one untouched. A decoding step
    writes the new position into the self-attention buffers in place (past this cache's
    ``length``, so what this cache holds stays valid): continue from a cache at most once, and
    ``select`` it first to branch.

    The buffers ``reorder`` and ``select`` make hold the history and room for one more position,
    no more: beam search copies the history every step anyway, and a step then attends over
    whole contiguous buffers rather than the front of larger ones (a prefix strided across the
    unused capacity: up to 1.7x slower attention, and more to copy, at 35 positions of 64).
    """

    layers: list[LayerCache]
    src_mask: Tensor
    length: int
    beams: int = 1

    def expand_beams(self, beams: int) -> DecoderCache:
        """``beams`` hypotheses per source (from a one-per-source cache); cross k/v are not copied."""
        if self.beams != 1:
            raise ValueError(f"expand_beams needs a cache with one hypothesis per source, not {self.beams}")
        index = torch.arange(self.src_mask.shape[0], device=self.src_mask.device).repeat_interleave(beams)
        return DecoderCache(self.reorder(index).layers, self.src_mask, self.length, beams)

    def reorder(self, index: Tensor) -> DecoderCache:
        """Beam reordering: ``index`` (B*beams,) picks, per row, a hypothesis of the same source,
        so only the self-attention history moves; cross k/v and the source mask stay as they are."""
        layers = [
            LayerCache(self._history(c.self_k, index), self._history(c.self_v, index), c.cross_k, c.cross_v)
            for c in self.layers
        ]
        return DecoderCache(layers, self.src_mask, self.length, self.beams)

    def select(self, index: Tensor) -> DecoderCache:
        """Keep rows ``index`` (B'*beams,), e.g. to drop finished sentences. With beams, ``index``
        takes whole sources: each run of ``beams`` entries holds rows of one source (in any order,
        so it may reorder beams at the same time)."""
        sources = index[:: self.beams] // self.beams  # (B',) the source of each kept group
        layers = [
            LayerCache(
                self._history(c.self_k, index),
                self._history(c.self_v, index),
                c.cross_k.index_select(0, sources),
                c.cross_v.index_select(0, sources),
            )
            for c in self.layers
        ]
        return DecoderCache(layers, self.src_mask.index_select(0, sources), self.length, self.beams)

    def _history(self, buffer: Tensor, index: Tensor) -> Tensor:
        """Rows ``index`` of the first ``length`` positions of a self-attention buffer (N, H,
        capacity, Dh), in a new buffer (N', H, length + 1, Dh): room for the next step's position."""
        _, heads, _, head_dim = buffer.shape
        out = buffer.new_empty(index.numel(), heads, self.length + 1, head_dim)  # (N', H, t+1, Dh)
        torch.index_select(buffer[:, :, : self.length], 0, index, out=out[:, :, : self.length])
        return out
