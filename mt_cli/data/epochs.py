"""The plans of an epoch's training batches for this rank: what ``loader.EpochLoader`` loads.

Every training corpus says which pairs an epoch draws (``TrainingPairs.epoch_draws``): a prepared
corpus every pair once, ``mixing.MixedCorpus`` each corpus by its weight (a fractional weight draws
another share each epoch). The plans ask that one question of any corpus, then batch the draws:

- ``FixedBatches``: one segmentation, the prepared pieces. A unit is one batch of the
  ``TokenBatchSampler`` over the epoch's draws (length-sorted over all of them).
- ``DropoutBatches``: BPE-dropout (Provilkov et al. 2020). A unit is a *pool*: a random slice of
  the draws of about ``POOL_TOKENS`` tokens, segmented anew from the prepared text, then sorted
  by its new widths and packed to the token budget (OpenNMT-py's pooled bucketing). So no epoch
  starts with a whole-corpus re-encode, and batches are bucketed by the widths they have, not the
  fixed ones (which, under dropout 0.1, doubled the padding).

Token dropout (``model.*_token_dropout``) stays in the model: one masked fill on the device, and
its random stream is the one the checkpoints save.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from mt_cli.config.sections import Config
from mt_cli.data.batch import Batch, collate, source_ids, target_ids
from mt_cli.data.dataset import within_max_len
from mt_cli.data.loader import EpochPlan
from mt_cli.data.prepared import SIDES, Flat
from mt_cli.data.sampler import TokenBatchSampler, epoch_seed, equal_shares, length_sorted_batches
from mt_cli.text.tokenizer import Tokenizer

# Tokens (fixed pieces) segmented and bucketed together under BPE-dropout. More pairs per pool pack
# batches tighter: on 0.5M synthetic pairs (scripts/synthetic-corpus.py) at train.max_tokens 4096,
# pools of 1M / 4M tokens padded 4.5% / 1.6% of each batch, and took 1.9 / 6.0 s to segment on one
# core. A pool's lists of ids exist only SEGMENT_PAIRS at a time; whole, it is a few flat arrays.
POOL_TOKENS = 2**22
SEGMENT_PAIRS = 16_384


class TrainingPairs(Protocol):
    """What the plans batch: ``prepared.PreparedCorpus`` (one corpus) and ``mixing.MixedCorpus``
    (several, by weight), told apart by nothing but their answers."""

    def widths(self) -> tuple[np.ndarray, np.ndarray]:
        """Per pair, the widths ``collate`` gives (source, decoder input)."""
        ...

    def pieces(self, side: str, index: int) -> list[int]: ...

    def text(self, side: str, index: int) -> str: ...

    def collate(self, indices: Sequence[int]) -> Batch: ...

    def epoch_draws(self, seed: int, epoch: int) -> np.ndarray:
        """The pairs ``epoch`` trains on (int64 indices, a pair as often as it is drawn); they
        depend on (seed, epoch) only, so a resumed epoch draws what it began with."""
        ...

    def fixed_draws(self) -> bool:
        """Whether every epoch draws the same pairs: then its count of fixed batches is known."""
        ...


class FixedBatches:
    """The prepared pieces: each epoch's draws, bucketed and batched by the ``TokenBatchSampler``;
    a unit is one batch (of indices into the corpus)."""

    def __init__(self, corpus: TrainingPairs, max_tokens: int, seed: int, rank: int, world_size: int):
        self.corpus, self.max_tokens, self.seed = corpus, max_tokens, seed
        self.rank, self.world_size = rank, world_size
        self._built: tuple[int, list[np.ndarray]] | None = None  # the last epoch built, for length()

    def units(self, epoch: int) -> list[np.ndarray]:
        if self._built is None or self._built[0] != epoch:
            draws = self.corpus.epoch_draws(self.seed, epoch)
            src, tgt = self.corpus.widths()
            sampler = TokenBatchSampler(
                src[draws], tgt[draws], self.max_tokens, True, self.seed, self.rank, self.world_size
            )
            sampler.set_epoch(epoch)
            # The sampler batches positions in the draws; a unit names the pairs themselves.
            self._built = epoch, [draws[batch] for batch in sampler.rank_batches()]
        return self._built[1]

    def load(self, unit: np.ndarray) -> list[Batch]:
        return [self.corpus.collate(unit.tolist())]

    def resume(self, units: list[np.ndarray], start: int) -> tuple[list[np.ndarray], int]:
        return units[start:], 0  # one batch per unit

    def length(self) -> int | None:
        """Batches per epoch: fixed when every epoch draws the same pairs (their widths pack into
        as many batches whatever the shuffle); when a fractional weight draws other pairs each
        epoch, its count can differ."""
        if not self.corpus.fixed_draws():
            return None
        return len(self.units(self._built[0] if self._built else 0))


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
    """Each epoch segments every pair it draws anew, one pool at a time; see the module docstring.

    Seeded by (seed, epoch, pool), so a resumed epoch sees the pieces it started with. A pair
    that would grow past ``max_len`` pieces on either side keeps its fixed pieces on both, so
    the set of trained pairs never changes. Every rank segments every pool and takes every W-th
    of its batches (halved to a multiple of W as the sampler does), so each draw is trained on
    once per epoch across ranks.
    """

    def __init__(
        self,
        corpus: TrainingPairs,
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
        drawn = self.corpus.epoch_draws(self.seed, epoch)
        order = drawn[torch.randperm(len(drawn), generator=generator).numpy()]  # in a random order
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
    corpus: TrainingPairs,
    tokenizers: tuple[Tokenizer, Tokenizer],
    rank: int,
    world_size: int,
) -> EpochPlan:
    """BPE-dropout's pools when either side has dropout, else the fixed batches; of whatever
    pairs the corpus draws (one corpus, or several by weight)."""
    tok, tc = cfg.tokenizer, cfg.train
    if tok.src_bpe_dropout or tok.tgt_bpe_dropout:
        dropout = (tok.src_bpe_dropout, tok.tgt_bpe_dropout)
        return DropoutBatches(
            corpus, tokenizers, dropout, cfg.data.max_len, tc.max_tokens, tc.seed, rank, world_size
        )
    return FixedBatches(corpus, tc.max_tokens, tc.seed, rank, world_size)
