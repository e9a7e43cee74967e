"""One epoch of training batches for this rank, built ahead of the training step.

An epoch is a list of *units* of work, fixed by (train.seed, epoch) before it starts; a plan's
``load(unit)`` turns one unit into this rank's padded batches. ``EpochLoader`` runs ``load`` in
``data.workers`` DataLoader processes (0: in the training process), in order, so the batches do
not depend on the number of workers, and a resumed epoch gets exactly the batches it began with.

- ``FixedBatches``: one segmentation, the prepared pieces, for every epoch. A unit is one batch
  of the ``TokenBatchSampler`` (length-sorted over the whole corpus).
- ``DropoutBatches``: BPE-dropout (Provilkov et al. 2020). A unit is a *pool*: a random slice of
  the corpus of about ``POOL_TOKENS`` tokens, segmented anew from the prepared text, then
  sorted by its new widths and packed to the token budget (OpenNMT-py's pooled bucketing). So no
  epoch starts with a whole-corpus re-encode, and batches are bucketed by the widths they have,
  not the fixed ones (which, under dropout 0.1, doubled the padding).
- ``mixing.MixedBatches``: several corpora (``data.corpora``), drawn by weight each epoch, then
  batched as ``FixedBatches`` batches one; under BPE-dropout, ``DropoutBatches`` pools the draws.

Token dropout (``model.*_token_dropout``) stays in the model: one masked fill on the device, and
its random stream is the one the checkpoints save.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from mt_cli.config.sections import Config
from mt_cli.data.batch import Batch, collate, source_ids, target_ids
from mt_cli.data.dataset import within_max_len
from mt_cli.data.mixing import MixedBatches, MixedCorpus
from mt_cli.data.prepared import SIDES, Flat, PreparedCorpus
from mt_cli.data.sampler import TokenBatchSampler, epoch_seed, equal_shares, length_sorted_batches
from mt_cli.errors import MtError
from mt_cli.text.tokenizer import Tokenizer

# Tokens (fixed pieces) segmented and bucketed together under BPE-dropout. More pairs per pool pack
# batches tighter: on 0.5M synthetic pairs (scripts/synthetic-corpus.py) at train.max_tokens 4096,
# pools of 1M / 4M tokens padded 4.5% / 1.6% of each batch, and took 1.9 / 6.0 s to segment on one
# core. A pool's lists of ids exist only SEGMENT_PAIRS at a time; whole, it is a few flat arrays.
POOL_TOKENS = 2**22
SEGMENT_PAIRS = 16_384


class EpochPlan(Protocol):
    def units(self, epoch: int) -> list[Any]:
        """The epoch's units of work, in training order (picklable: they go to the workers)."""
        ...

    def load(self, unit: Any) -> Iterable[Batch]:
        """This rank's batches of one unit (runs in a worker process; iterated in the training one)."""
        ...

    def resume(self, units: list[Any], start: int) -> tuple[list[Any], int]:
        """To go on from batch ``start``: the units still to load, and how many of their first
        batches to drop."""
        ...

    def length(self) -> int | None:
        """Batches per epoch for this rank, where known before the epoch is built."""
        ...


class FixedBatches:
    """The prepared pieces every epoch: a unit is one of the sampler's batches."""

    def __init__(self, corpus: PreparedCorpus, max_tokens: int, seed: int, rank: int, world_size: int):
        self.corpus = corpus
        widths = corpus.widths()
        self.sampler = TokenBatchSampler(*widths, max_tokens, True, seed, rank, world_size)

    def units(self, epoch: int) -> list[np.ndarray]:
        self.sampler.set_epoch(epoch)
        return self.sampler.rank_batches()

    def load(self, unit: np.ndarray) -> list[Batch]:
        return [self.corpus.collate(unit.tolist())]

    def resume(self, units: list[np.ndarray], start: int) -> tuple[list[np.ndarray], int]:
        return units[start:], 0  # one batch per unit

    def length(self) -> int:
        return len(self.sampler)


@dataclass(frozen=True)
class SegmentedPool:
    """A pool after segmentation, with this rank's batches of it in training order. Iterating
    collates one batch at a time, in the training process: a pool's padded tensors (masks
    included) would take hundreds of MB in the loader's queue; its flat ids take a few."""

    src: Flat  # ids with specials
    tgt: Flat
    batches: list[np.ndarray]  # positions in the pool

    def __iter__(self) -> Iterator[Batch]:
        for batch in self.batches:
            yield collate([self.src[i] for i in batch], [self.tgt[i] for i in batch])


@dataclass(frozen=True)
class Pool:
    """Pairs segmented, bucketed and batched together; ``seed`` draws their BPE-dropout."""

    seed: int
    pairs: np.ndarray  # corpus indices


class DropoutBatches:
    """Each epoch segments every pair anew, one pool at a time; see the module docstring.

    Seeded by (seed, epoch, pool), so a resumed epoch sees the pieces it started with. A pair
    that would grow past ``max_len`` pieces on either side keeps its fixed pieces on both, so
    the set of trained pairs never changes. Every rank segments every pool and takes every W-th
    of its batches (halved to a multiple of W as the sampler does), so each pair is trained on
    once per epoch across ranks.
    """

    def __init__(
        self,
        corpus: PreparedCorpus | MixedCorpus,
        tokenizers: tuple[Tokenizer, Tokenizer],
        dropout: tuple[float, float],
        max_len: int,
        max_tokens: int,
        seed: int,
        rank: int,
        world_size: int,
    ):
        self.corpus, self.tokenizers, self.dropout = corpus, tokenizers, dropout
        self.max_len, self.max_tokens, self.seed = max_len, max_tokens, seed
        self.rank, self.world_size = rank, world_size

    def units(self, epoch: int) -> list[Pool]:
        seed = epoch_seed(self.seed, epoch)
        generator = torch.Generator()
        generator.manual_seed(seed)
        if isinstance(self.corpus, MixedCorpus):  # the epoch's draws, in a random order
            drawn = self.corpus.draws(self.seed, epoch)
            order = drawn[torch.randperm(len(drawn), generator=generator).numpy()]
        else:
            order = torch.randperm(len(self.corpus), generator=generator).numpy()
        src, tgt = self.corpus.widths()
        spent = np.cumsum(src[order] + tgt[order], dtype=np.int64)  # fixed-piece tokens so far
        ends = np.arange(POOL_TOKENS, int(spent[-1]) - POOL_TOKENS // 2, POOL_TOKENS)
        cuts = np.searchsorted(spent, ends, side="right")
        pools = np.split(order, cuts)  # the last pool takes a remainder of under half a pool
        return [Pool(epoch_seed(seed, k), pairs) for k, pairs in enumerate(pools)]

    def load(self, pool: Pool) -> SegmentedPool:
        src, tgt = self.segment(pool)
        widths = src.widths(), tgt.widths() - 1  # as collate pads them: source, decoder input
        packed = length_sorted_batches(np.arange(len(src)), *widths, self.max_tokens)
        batches = equal_shares(packed, self.world_size, self.max_tokens)
        generator = torch.Generator()
        generator.manual_seed(pool.seed)
        order = torch.randperm(len(batches), generator=generator).tolist()[self.rank :: self.world_size]
        return SegmentedPool(src, tgt, [batches[k] for k in order])

    def segment(self, pool: Pool) -> tuple[Flat, Flat]:
        """The pool's source and target ids (with specials), segmented with this pool's dropout,
        ``SEGMENT_PAIRS`` at a time."""
        parts = []
        for k, start in enumerate(range(0, len(pool.pairs), SEGMENT_PAIRS)):
            indices = pool.pairs[start : start + SEGMENT_PAIRS].tolist()
            parts.append(tuple(map(Flat.of, self._segment(indices, pool.seed + 2 * k))))
        src, tgt = zip(*parts, strict=True)
        return Flat.concat(list(src)), Flat.concat(list(tgt))

    def _segment(self, indices: list[int], seed: int) -> tuple[list[list[int]], list[list[int]]]:
        sides = []
        for k, (side, tok, dropout) in enumerate(zip(SIDES, self.tokenizers, self.dropout, strict=True)):
            if dropout:
                texts = [self.corpus.text(side, i) for i in indices]
                sides.append(tok.encode_with_dropout(texts, dropout, seed + k))
            else:
                sides.append([self.corpus.pieces(side, i) for i in indices])
        src, tgt = sides
        for j, i in enumerate(indices):
            if not within_max_len(len(src[j]) + 1, len(tgt[j]) + 1, self.max_len):
                src[j], tgt[j] = self.corpus.pieces("src", i), self.corpus.pieces("tgt", i)
        return [source_ids(ids) for ids in src], [target_ids(ids) for ids in tgt]

    def resume(self, units: list[Pool], start: int) -> tuple[list[Pool], int]:
        return units, start  # a pool's batch count is known once it is segmented

    def length(self) -> None:
        return None


def epoch_plan(
    cfg: Config,
    corpus: PreparedCorpus | MixedCorpus,
    tokenizers: tuple[Tokenizer, Tokenizer],
    rank: int,
    world_size: int,
) -> EpochPlan:
    """BPE-dropout's pools when either side has dropout, else the fixed batches (of one corpus, or
    of the weighted draws from several)."""
    tok, tc = cfg.tokenizer, cfg.train
    if tok.src_bpe_dropout or tok.tgt_bpe_dropout:
        dropout = (tok.src_bpe_dropout, tok.tgt_bpe_dropout)
        return DropoutBatches(
            corpus, tokenizers, dropout, cfg.data.max_len, tc.max_tokens, tc.seed, rank, world_size
        )
    if isinstance(corpus, MixedCorpus):
        return MixedBatches(corpus, tc.max_tokens, tc.seed, rank, world_size)
    return FixedBatches(corpus, tc.max_tokens, tc.seed, rank, world_size)


class _Units(torch.utils.data.Dataset):
    """What a worker holds: the plan. The DataLoader's "index" is (epoch, unit) itself."""

    def __init__(self, plan: EpochPlan) -> None:
        self.plan = plan

    def __getitem__(self, key: tuple[int, Any]) -> tuple[int, Iterable[Batch] | MtError]:
        epoch, unit = key
        try:
            return epoch, self.plan.load(unit)
        except MtError as err:  # raised again as itself in the training process: one line, its exit code
            return epoch, err


class _Schedule(torch.utils.data.Sampler):
    """(epoch, unit) from a position on, epoch after epoch without end: the workers run on into
    the next epoch while the last batches of this one train, so no epoch starts by waiting."""

    def __init__(self, plan: EpochPlan, epoch: int, units: list[Any]) -> None:
        self.plan, self.epoch, self.units = plan, epoch, units  # units: what is left of ``epoch``

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        units = self.units
        for epoch in itertools.count(self.epoch):
            yield from ((epoch, unit) for unit in units)
            units = self.plan.units(epoch + 1)


def _as_loaded(loaded: tuple[int, Any]) -> tuple[int, Any]:
    return loaded


class EpochLoader:
    """This rank's batches, epoch by epoch, loaded by ``workers`` processes ahead of the training
    step (they open the prepared corpus anew: ``PreparedCorpus.__reduce__``)."""

    def __init__(self, plan: EpochPlan, workers: int, seed: int) -> None:
        self.plan, self.workers, self.seed = plan, workers, seed
        self._stream: Iterator[tuple[int, Batch]] | None = None
        self._held: tuple[int, Batch] | None = None  # the first batch of the next epoch, once read
        self._position: tuple[int, int] | None = None  # where the stream stands: (epoch, batch)

    def batches(self, epoch: int, start: int = 0) -> Iterator[Batch]:
        """The batches of ``epoch`` from batch ``start`` on (the ones before it were trained on)."""
        if self._stream is None or self._position != (epoch, start):
            self._stream, self._held = self._open(epoch, start), None
        while True:
            item = self._held if self._held is not None else next(self._stream)
            self._held = None
            if item[0] != epoch:
                self._held, self._position = item, (item[0], 0)
                return
            start += 1
            self._position = (epoch, start)
            yield item[1]

    def _open(self, epoch: int, start: int) -> Iterator[tuple[int, Batch]]:
        units, skip = self.plan.resume(self.plan.units(epoch), start)
        generator = torch.Generator()  # the loader draws its worker seeds here, not from training's RNG
        generator.manual_seed(self.seed)
        loader = torch.utils.data.DataLoader(
            _Units(self.plan),
            batch_size=None,
            sampler=_Schedule(self.plan, epoch, units),
            num_workers=self.workers,
            collate_fn=_as_loaded,
            generator=generator,
        )
        for unit_epoch, loaded in loader:
            if isinstance(loaded, MtError):
                raise loaded
            for batch in loaded:
                if skip:
                    skip -= 1
                    continue
                yield unit_epoch, batch
