"""Token-budget batches: the one batcher that training, validation and translation share.

``fill_batches`` packs items, in the order given, into batches whose padded size stays under
a token budget; ``TokenBatchSampler`` gives it the training pairs sorted by length, shuffles
the batches per epoch and shards them over DDP ranks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import torch

from mt_cli.errors import DataError


def batch_ends(widths: Sequence[Sequence[int]], max_tokens: int) -> list[int]:
    """Where each batch ends when items are packed greedily, in the order given, under ``max_tokens``.

    ``widths`` holds, in that order, one width per item for each padded tensor (e.g. source and
    target); a batch costs its sentence count times the sum of its widest item per tensor. An
    item wider than the budget forms a batch of its own. Given items sorted by width, padding
    stays small.
    """
    ends: list[int] = []
    count, widest = 0, [0] * len(widths)
    for position, item in enumerate(zip(*widths, strict=True)):
        grown = [max(w, width) for w, width in zip(widest, item, strict=True)]
        if count and sum(grown) * (count + 1) > max_tokens:
            ends.append(position)
            count, grown = 0, list(item)
        count += 1
        widest = grown
    if count:
        ends.append(len(widths[0]))
    return ends


def fill_batches(order: Iterable[int], widths: Sequence[Sequence[int]], max_tokens: int) -> list[list[int]]:
    """Items of ``order`` packed greedily, in that order, into batches under ``max_tokens``
    (``batch_ends``; ``widths`` per item, indexed by item)."""
    order = list(order)
    ends = batch_ends([[column[i] for i in order] for column in widths], max_tokens)
    return [order[start:end] for start, end in zip([0, *ends], ends)]


def epoch_seed(seed: int, epoch: int) -> int:
    """One epoch's seed for batch order and BPE-dropout.

    Mixed rather than seed + epoch, so that (seed 1, epoch 1) and (seed 2, epoch 0) differ.
    """
    return (seed * 1_000_003 + epoch) % 2**63


class TokenBatchSampler:
    """Batches of example indices, bucketed by length and filled to a padded-token budget.

    Budget: (longest src + longest tgt) * sentences <= max_tokens; a single pair longer than
    the budget forms a batch of its own. Pairs are sorted by (src length, tgt length) so the
    padding stays small on both sides. With ``shuffle`` the tie order within equal lengths
    and the order of the batches change with the epoch (seeded ``torch.Generator``); without
    it the sorted order is kept (callers restore the original order by index).

    Sharding: all ranks build the same global list of batches and rank r takes batches
    r, r + W, r + 2W, ... To give every rank the same number of batches (DDP needs it) without
    dropping or repeating a pair, the largest batches are halved until the count divides by
    the world size; so each pair appears exactly once per epoch across ranks.

    The batches of an epoch depend only on (seed, epoch): a resumed epoch skips the batches it
    trained on (``data.loader.EpochLoader``). ``len()`` is the per-rank epoch length.
    """

    def __init__(
        self,
        src_lengths: Sequence[int],
        tgt_lengths: Sequence[int],
        max_tokens: int,
        shuffle: bool,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if max_tokens < 1 or world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(
                f"bad sampler settings max_tokens={max_tokens} rank={rank} world_size={world_size}"
            )
        self.max_tokens, self.shuffle, self.seed = max_tokens, shuffle, seed
        self.rank, self.world_size = rank, world_size
        self.epoch = 0
        if len(src_lengths) != len(tgt_lengths):
            raise ValueError(f"{len(src_lengths)} source lengths but {len(tgt_lengths)} target lengths")
        # numpy: a prepared corpus of millions of pairs hands its widths over without a Python list
        self.src_lengths = np.asarray(src_lengths, dtype=np.int32)
        self.tgt_lengths = np.asarray(tgt_lengths, dtype=np.int32)
        self._cache: tuple[int, list[np.ndarray]] | None = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _epoch_batches(self) -> list[np.ndarray]:
        """This epoch's batches for all ranks as index arrays: millions of indices as Python ints
        would cost ~36 bytes each."""
        if self._cache is None or self._cache[0] != self.epoch:
            self._cache = (self.epoch, self._build(self.epoch))
        return self._cache[1]

    def rank_batches(self) -> list[np.ndarray]:
        """This rank's batches of the epoch, as index arrays."""
        return self._epoch_batches()[self.rank :: self.world_size]

    def batches(self) -> list[list[int]]:
        """This rank's batches of the epoch."""
        return [batch.tolist() for batch in self.rank_batches()]

    def __len__(self) -> int:
        return len(self._epoch_batches()) // self.world_size

    def __iter__(self) -> Iterator[list[int]]:
        return (batch.tolist() for batch in self.rank_batches())

    def _build(self, epoch: int) -> list[np.ndarray]:
        n = len(self.src_lengths)
        if n == 0:
            return []
        generator = torch.Generator()
        generator.manual_seed(epoch_seed(self.seed, epoch))
        order = torch.randperm(n, generator=generator).numpy() if self.shuffle else np.arange(n)
        batches = equal_shares(
            length_sorted_batches(order, self.src_lengths, self.tgt_lengths, self.max_tokens),
            self.world_size,
            self.max_tokens,
        )
        if self.shuffle:
            batches = [batches[k] for k in torch.randperm(len(batches), generator=generator).tolist()]
        return batches


def length_sorted_batches(
    order: np.ndarray, src: np.ndarray, tgt: np.ndarray, max_tokens: int
) -> list[np.ndarray]:
    """The items of ``order`` sorted by (src, tgt) width and packed into token-budget batches;
    the sort is stable, so items of equal widths keep the order given (a shuffle, in training)."""
    order = order[np.lexsort((tgt[order], src[order]))]
    ends = batch_ends((src[order].tolist(), tgt[order].tolist()), max_tokens)
    return [order[start:end] for start, end in zip([0, *ends], ends)]


def equal_shares(batches: list[np.ndarray], world_size: int, max_tokens: int) -> list[np.ndarray]:
    """``batches`` with the largest halved until their count divides by ``world_size``, so that
    every rank gets as many batches (DDP needs it) and no pair is dropped or repeated."""
    batches = list(batches)
    while len(batches) % world_size:
        largest = max(range(len(batches)), key=lambda k: len(batches[k]))
        batch = batches[largest]
        if len(batch) < 2:
            pairs = sum(map(len, batches))
            raise DataError(
                f"cannot give {world_size} processes equal shares of {pairs} pairs at "
                f"max_tokens={max_tokens}; use fewer processes or a larger train.max_tokens"
            )
        half = len(batch) // 2
        batches[largest : largest + 1] = [batch[:half], batch[half:]]
    return batches
