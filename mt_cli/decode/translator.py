"""mt's own engine: a trained model (its card, tokenizers and weights), or an ensemble of them.

Lines are sorted by length into token-budget batches (little padding, big batches), decoded,
and put back in input order. An empty line gives an empty line; a line longer than the
model's positions is cut, with one warning naming the line. Translation, forced decoding and
alignment all batch this way; each batch decodes with the search ``search.run_search`` chooses
(``search.ModelSearches``), forced decoding is ``scoring``, attention is ``alignment``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from mt_cli.config.card import ModelCard
from mt_cli.config.options import TranslateOptions
from mt_cli.data.batch import pad_sources, source_ids
from mt_cli.data.sampler import fill_batches
from mt_cli.decode import search
from mt_cli.decode.alignment import attention_matrix, word_alignment
from mt_cli.decode.constrained import constrained_beam_search, holds
from mt_cli.decode.engine import (
    CardEngine,
    Warn,
    ignore,
)
from mt_cli.decode.ensemble import Ensemble
from mt_cli.decode.hypotheses import Found
from mt_cli.decode.processes import BatchPool, default_processes
from mt_cli.decode.results import Alignment, Hypothesis, Translation
from mt_cli.decode.scoring import force_decode
from mt_cli.errors import InputError
from mt_cli.model.packed import pack_for_cpu_inference
from mt_cli.model.transformer import Transformer
from mt_cli.runtime.allocator import no_cycle_collection, reuse_freed_memory
from mt_cli.runtime.device import autocast, inference_dtype, resolve_device
from mt_cli.runtime.precision import ComputeType
from mt_cli.specials import EOS_PIECE
from mt_cli.text.tokenizer import Tokenizer
from mt_cli.trained import TrainedModel


@dataclass
class Translator(CardEngine):
    model: Transformer | Ensemble
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    card: ModelCard
    device: torch.device
    dtype: torch.dtype | None  # autocast dtype; None = fp32
    checkpoint: Path | None = None  # the file the weights came from, when loaded from a run
    members: tuple[str, ...] = ()  # an ensemble's members' origins
    # Worker processes that decode batches side by side (``processes.BatchPool``); None: one per
    # intra-op thread on a Linux CPU. 1 decodes in this process, as a model still training must.
    processes: int | None = None
    _pool: BatchPool | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(
        cls,
        trained: TrainedModel,
        device: str | torch.device = "auto",
        compute_type: ComputeType = ComputeType.DEFAULT,
    ) -> Translator:
        """A translator of ``trained`` on ``device`` (a name, or a device such as a torchrun
        rank's own GPU), computing in ``compute_type``. It takes the model over: moved and cast
        in place (fp32 on the CPU leaves it as it is)."""
        target = device if isinstance(device, torch.device) else resolve_device(device)
        dtype = inference_dtype(target, compute_type)
        return cls.for_inference(
            trained.model, trained.src_tok, trained.tgt_tok, trained.card, target, dtype, trained.checkpoint
        )

    @classmethod
    def for_inference(
        cls,
        model: Transformer | Ensemble,
        src_tok: Tokenizer,
        tgt_tok: Tokenizer,
        card: ModelCard,
        device: torch.device,
        dtype: torch.dtype | None,
        checkpoint: Path | None = None,
        members: tuple[str, ...] = (),
    ) -> Translator:
        """A translator that owns ``model``: moved to ``device``, in eval mode, cast to ``dtype``;
        on the CPU its linear layers packed for oneDNN (``model.packed``) and malloc told to keep
        freed memory (``runtime.allocator``).

        Autocast would re-cast every weight at every decoding step, so for inference the weights
        are cast once (LayerNorm and softmax still accumulate in fp32 inside). `mt eval` and the
        closing test scores of `mt train` both come through here, so they agree on a checkpoint.
        """
        model.to(device).eval()
        if dtype is not None:
            model.to(dtype=dtype)
        if device.type == "cpu":
            pack_for_cpu_inference(model, dtype or torch.float32)
            reuse_freed_memory()
        return cls(model, src_tok, tgt_tok, card, device, dtype, checkpoint, members)

    @property
    def origin(self) -> str:
        if self.members:
            return " + ".join(self.members)
        return str(self.checkpoint) if self.checkpoint is not None else "a model in memory"

    @property
    def max_positions(self) -> int:
        return self.model.max_positions  # an ensemble's: its members' fewest

    def encode_sources(
        self, lines: Sequence[str], warn: Warn, first_line: int = 1, tgt_lang: str | None = None
    ) -> list[list[int]]:
        """Source ids with EOS, after the target tag of ``tgt_lang`` (None: the card's) when the
        model has them, cut to the model's positions (with one warning per cut line, numbered
        from ``first_line``)."""
        encoded = self.source_pieces(lines, self.max_positions, warn, first_line, tgt_lang)
        return [source_ids(ids) for ids in encoded]

    def batches(self, sources: list[list[int]], beam_size: int) -> list[list[int]]:
        """Indices of non-empty sources, sorted by length, packed under ``decode.max_tokens``
        (source tokens times beams)."""
        order = sorted((i for i, ids in enumerate(sources) if len(ids) > 1), key=lambda i: len(sources[i]))
        widths = [len(ids) * beam_size for ids in sources]
        return fill_batches(order, (widths,), self.card.decode.max_tokens)

    def _pair_batches(self, sources: list[list[int]], targets: list[list[int]]) -> list[list[int]]:
        """Indices of every (source, target) pair sorted by length, packed under ``decode.max_tokens``."""
        order = sorted(range(len(sources)), key=lambda i: (len(sources[i]), len(targets[i])))
        widths = [len(s) + len(t) + 1 for s, t in zip(sources, targets)]  # target + BOS or EOS
        return fill_batches(order, (widths,), self.card.decode.max_tokens)

    def _padded(self, sources: Sequence[list[int]]) -> tuple[Tensor, Tensor]:
        src, src_mask = pad_sources(sources)  # (B, S), (B, 1, 1, S)
        return src.to(self.device), src_mask.to(self.device)

    def _check_layer(self, layer: int | None) -> None:
        decoders = list(self.model.members) if isinstance(self.model, Ensemble) else [self.model]
        for decoder in decoders:
            try:
                decoder.decoder_layer_index(layer)
            except ValueError as err:  # the model names the layers it has
                raise InputError(f"alignment layer: {err}") from None

    def _translated(
        self, lines: Sequence[str], options: TranslateOptions, warn: Warn, first_line: int
    ) -> list[Translation]:
        sources, found = self._searched(lines, options, warn, first_line, None)
        return self._translations(lines, sources, found, options)

    guarantees_terms = True

    def _constrained(
        self,
        lines: Sequence[str],
        options: TranslateOptions,
        warn: Warn,
        first_line: int,
        constraints: list[list[list[int]]],
    ) -> list[Translation]:
        """``_translated`` by constrained beam search: each line's hypotheses hold its
        ``constraints``; a line whose best misses one (its length limit came first) is named in
        a warning."""
        sources, found = self._searched(lines, options, warn, first_line, constraints)
        for index, (hyps, terms) in enumerate(zip(found, constraints)):
            if len(sources[index]) > 1 and not all(holds(hyps[0].tokens, term) for term in terms):
                warn(f"line {first_line + index}: the length limit came before every glossary term")
        return self._translations(lines, sources, found, options)

    def _searched(
        self,
        lines: Sequence[str],
        options: TranslateOptions,
        warn: Warn,
        first_line: int,
        constraints: list[list[list[int]]] | None,
    ) -> tuple[list[list[int]], list[list[Found]]]:
        """The lines' source ids and hypotheses, searched in length-sorted batches (an empty line
        has one empty hypothesis); with ``constraints`` each line's hold its own."""
        sources = self.encode_sources(lines, warn, first_line, options.tgt_lang)
        found: list[list[Found]] = [[Found([], 0.0)] for _ in sources]
        groups = self.batches(sources, options.beam_size)
        batches = [
            (
                [sources[i] for i in group],
                options,
                [lines[i] for i in group],
                None if constraints is None else [constraints[i] for i in group],
            )
            for group in groups
        ]
        for group, hyps in zip(groups, self._decode_batches(batches)):
            for index, line_hyps in zip(group, hyps):
                found[index] = line_hyps
        return sources, found

    def _translations(
        self,
        lines: Sequence[str],
        sources: list[list[int]],
        found: list[list[Found]],
        options: TranslateOptions,
    ) -> list[Translation]:
        """The ``Translation`` of each line from its source ids and the hypotheses found."""
        alignments = (
            self._hypothesis_alignments(sources, found, options.alignment_layer, options.tgt_lang)
            if options.align
            else None
        )
        # One call detokenizes every hypothesis: SentencePiece per line cost a quarter of greedy's time.
        texts = iter(self.tgt_tok.decode([h.tokens for hyps in found for h in hyps]))
        return [
            Translation(
                line,
                tuple(
                    Hypothesis(
                        next(texts),
                        tuple(self.tgt_tok.to_pieces(h.tokens)),
                        h.score,
                        alignments[i][k] if alignments is not None else None,
                    )
                    for k, h in enumerate(hyps)
                ),
            )
            for i, (line, hyps) in enumerate(zip(lines, found))
        ]

    def _decode_batches(self, batches: Sequence[tuple[Any, ...]]) -> list[list[list[Found]]]:
        """``_decode_batch`` of each batch, in order: in worker processes when there is more than one
        batch and ``processes`` allows; a line's result is the same either way (tests/test_processes.py)."""
        processes = default_processes(self.device) if self.processes is None else self.processes
        if processes < 2 or len(batches) < 2:
            return [self._decode_batch(*batch) for batch in batches]
        if self._pool is None:
            self._pool = BatchPool(self._decode_batch, processes)
        return self._pool.map(batches)

    def _decode_batch(
        self,
        sources: list[list[int]],
        options: TranslateOptions,
        lines: list[str],
        constraints: list[list[list[int]]] | None = None,
    ) -> list[list[Found]]:
        """The hypotheses of one batch of source ids (with EOS) of ``lines``; with ``constraints``
        (each line's target terms, as ids) by constrained beam search."""
        src, src_mask = self._padded(sources)
        dec = self.card.decode
        with autocast(self.device, self.dtype), no_cycle_collection():
            if constraints is not None:
                return constrained_beam_search(
                    self.model, src, src_mask, constraints, options.beam_size, options.alpha,
                    dec.max_len_a, dec.max_len_b, options.n_best, self.tgt_tok.word_continuations,
                ).found  # fmt: skip
            searches = search.ModelSearches(self.model, src, src_mask, dec.max_len_a, dec.max_len_b, lines)
            return search.run_search(options, searches)

    def _hypothesis_alignments(
        self,
        sources: list[list[int]],
        found: list[list[Found]],
        layer: int | None,
        tgt_lang: str | None,
    ) -> list[list[Alignment]]:
        """Word alignments of every hypothesis of every line with its source."""
        rows = [(i, k) for i, hyps in enumerate(found) for k in range(len(hyps))]
        pairs = self._align_ids(
            [sources[i] for i, _ in rows],
            [found[i][k].tokens for i, k in rows],
            layer,
            self.prefix_pieces(tgt_lang),
        )
        result: list[list[Alignment]] = [[] for _ in found]
        for (i, _), pair in zip(rows, pairs):
            result[i].append(pair)
        return result

    def _align_ids(
        self, sources: list[list[int]], targets: list[list[int]], layer: int | None, tags: int
    ) -> list[Alignment]:
        """Word alignments of source ids (with EOS, after ``tags`` tag pieces, which align to
        nothing and count as no word) and target ids (without BOS/EOS), pair by pair."""
        result: list[Alignment] = [() for _ in sources]
        real = [i for i, (s, t) in enumerate(zip(sources, targets)) if len(s) > 1 and t]
        for group in self._pair_batches([sources[i] for i in real], [targets[i] for i in real]):
            indices = [real[g] for g in group]
            src, src_mask = self._padded([sources[i] for i in indices])
            with autocast(self.device, self.dtype):
                matrices = attention_matrix(self.model, src, src_mask, [targets[i] for i in indices], layer)
            for index, matrix in zip(indices, matrices):
                src_pieces = self.src_tok.to_pieces(sources[index][tags:-1])  # no tag, no EOS
                tgt_pieces = self.tgt_tok.to_pieces(targets[index])
                result[index] = tuple(word_alignment(matrix[:, tags:], src_pieces, tgt_pieces))
        return result

    def _forced(
        self, sources: list[list[int]], targets: list[list[int]]
    ) -> list[tuple[Sequence[str], Sequence[float]]]:
        src_ids = [source_ids(ids) for ids in sources]
        log_probs: list[list[float]] = [[] for _ in src_ids]
        for group in self._pair_batches(src_ids, targets):
            src, src_mask = self._padded([src_ids[i] for i in group])
            with autocast(self.device, self.dtype):
                rows = force_decode(self.model, src, src_mask, [targets[i] for i in group])
            for index, row in zip(group, rows):
                log_probs[index] = row  # each target piece, then EOS
        return [([*self.tgt_tok.to_pieces(ids), EOS_PIECE], row) for ids, row in zip(targets, log_probs)]

    def _aligned(
        self, sources: list[list[int]], targets: list[list[int]], layer: int | None, tags: int
    ) -> list[Alignment]:
        return self._align_ids([source_ids(ids) for ids in sources], targets, layer, tags)

    def attention(
        self, source: str, target: Sequence[str], layer: int | None = None, tgt_lang: str | None = None
    ) -> tuple[list[str], list[str], Tensor]:
        """Source pieces (a target tag first, if any), target pieces (EOS last on both) and the
        (T, S) cross-attention, fp32."""
        self._check_layer(layer)
        ids = self.encode_sources([source], ignore, 1, tgt_lang)[0]
        tokens = self.tgt_tok.to_ids(target)[: self.max_positions - 2]
        src, src_mask = self._padded([ids])
        with autocast(self.device, self.dtype):
            weights = attention_matrix(self.model, src, src_mask, [tokens], layer)[0]  # (T, S)
        src_pieces = [*self.src_tok.to_pieces(ids[:-1]), EOS_PIECE]
        tgt_pieces = [*self.tgt_tok.to_pieces(tokens), EOS_PIECE]
        return src_pieces, tgt_pieces, weights
