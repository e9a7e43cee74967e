"""Text pairs -> encoded ids -> token-budget batches -> ``Batch`` (padded tensors and masks).

``datasets`` is imported inside the functions that need it: the translator imports ``Batch``
and ``pad_sources`` from here and must start fast.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from mt_cli.errors import DataError
from mt_cli.tokenizer import BOS_ID, EOS_ID, PAD_ID

if TYPE_CHECKING:
    import datasets

    from mt_cli.tokenizer import Tokenizer

# -------------------------------------------------------------------------------- encoding


def source_ids(pieces: list[int]) -> list[int]:
    """What the encoder reads: the pieces, then EOS."""
    return pieces + [EOS_ID]


def target_ids(pieces: list[int]) -> list[int]:
    """BOS + pieces + EOS: collate cuts it into the decoder input and the loss target."""
    return [BOS_ID] + pieces + [EOS_ID]


def encode_split(ds: datasets.Dataset, src_tok: Tokenizer, tgt_tok: Tokenizer) -> datasets.Dataset:
    """Add ``src_ids`` = pieces + [EOS] and ``tgt_ids`` = [BOS] + pieces + [EOS]; text is kept."""

    def encode(batch: dict[str, list[str]]) -> dict[str, list[list[int]]]:
        return {
            "src_ids": [source_ids(ids) for ids in src_tok.encode(batch["src"])],
            "tgt_ids": [target_ids(ids) for ids in tgt_tok.encode(batch["tgt"])],
        }

    return ds.map(encode, batched=True, batch_size=4000)


def sequence_lengths(ds: datasets.Dataset) -> tuple[list[int], list[int]]:
    """Per pair: (len(src_ids), len(tgt_ids) - 1), the widths collate gives src and tgt_in/out."""
    import pyarrow.compute as pc

    table = ds.with_format("arrow")
    src = pc.list_value_length(table["src_ids"]).to_pylist()
    tgt = [n - 1 for n in pc.list_value_length(table["tgt_ids"]).to_pylist()]
    return src, tgt


def pair_widths(src_ids: list[list[int]], tgt_ids: list[list[int]]) -> tuple[list[int], list[int]]:
    """Per pair: the widths collate gives src and tgt_in/tgt_out, which the sampler batches by."""
    return [len(ids) for ids in src_ids], [len(ids) - 1 for ids in tgt_ids]


def encoded_lists(ds: datasets.Dataset) -> tuple[list[list[int]], list[list[int]]]:
    """``src_ids`` and ``tgt_ids`` as plain lists, for indexing by the sampler's batches."""
    columns = ds.with_format(None)[:]
    return columns["src_ids"], columns["tgt_ids"]


def within_max_len(src_width: int, tgt_width: int, max_len: int) -> bool:
    """At most ``max_len`` pieces per side, specials not counted (widths as ``pair_widths`` gives them).

    That is: len(src_ids) <= max_len + 1 (EOS) and len(tgt_ids) <= max_len + 2 (BOS, EOS), so
    every tensor the model sees is at most max_len + 1 wide.
    """
    return src_width <= max_len + 1 and tgt_width <= max_len + 1


def filter_long(ds: datasets.Dataset, max_len: int) -> tuple[datasets.Dataset, int]:
    """Drop pairs that are not ``within_max_len``. Returns (kept, number dropped).

    For training only: evaluation must score every pair.
    """
    src, tgt = sequence_lengths(ds)
    keep = [i for i, (s, t) in enumerate(zip(src, tgt, strict=True)) if within_max_len(s, t, max_len)]
    if len(keep) == len(ds):
        return ds, 0
    return ds.select(keep), len(ds) - len(keep)


# -------------------------------------------------------------------------------- batching


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

    Resume: ``set_epoch(e)`` then ``start_at(i)`` makes the next iteration yield exactly the
    batches from index i of this rank's epoch. ``len()`` is the full per-rank epoch length.
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
        self._start = 0
        self.set_lengths(src_lengths, tgt_lengths)

    def set_lengths(self, src_lengths: Sequence[int], tgt_lengths: Sequence[int]) -> None:
        """Per-pair widths to batch by; BPE-dropout changes them every epoch."""
        if len(src_lengths) != len(tgt_lengths):
            raise ValueError(f"{len(src_lengths)} source lengths but {len(tgt_lengths)} target lengths")
        self.src_lengths = [int(n) for n in src_lengths]
        self.tgt_lengths = [int(n) for n in tgt_lengths]
        self._cache: tuple[int, list[list[int]]] | None = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def start_at(self, batch_index: int) -> None:
        """Skip the first ``batch_index`` batches of the next iteration only (mid-epoch resume)."""
        if not 0 <= batch_index <= len(self):
            raise ValueError(f"batch index {batch_index} is outside this epoch's {len(self)} batches")
        self._start = batch_index

    def global_batches(self) -> list[list[int]]:
        """This epoch's batches for all ranks, in order (rank r takes every W-th from r)."""
        if self._cache is None or self._cache[0] != self.epoch:
            self._cache = (self.epoch, self._build(self.epoch))
        return self._cache[1]

    def batches(self) -> list[list[int]]:
        return self.global_batches()[self.rank :: self.world_size]

    def __len__(self) -> int:
        return len(self.global_batches()) // self.world_size

    def __iter__(self) -> Iterator[list[int]]:
        start, self._start = self._start, 0
        return iter(self.batches()[start:])

    def _build(self, epoch: int) -> list[list[int]]:
        n = len(self.src_lengths)
        if n == 0:
            return []
        src, tgt = self.src_lengths, self.tgt_lengths
        generator = torch.Generator()
        generator.manual_seed(epoch_seed(self.seed, epoch))
        order: Sequence[int] = torch.randperm(n, generator=generator).tolist() if self.shuffle else range(n)
        order = sorted(order, key=lambda i: (src[i], tgt[i]))  # stable: ties keep the shuffled order

        batches: list[list[int]] = []
        current: list[int] = []
        max_src = max_tgt = 0
        for i in order:
            new_src, new_tgt = max(max_src, src[i]), max(max_tgt, tgt[i])
            if current and (new_src + new_tgt) * (len(current) + 1) > self.max_tokens:
                batches.append(current)
                current, new_src, new_tgt = [], src[i], tgt[i]
            current.append(i)
            max_src, max_tgt = new_src, new_tgt
        batches.append(current)

        while len(batches) % self.world_size:
            largest = max(range(len(batches)), key=lambda k: len(batches[k]))
            batch = batches[largest]
            if len(batch) < 2:
                raise DataError(
                    f"cannot give {self.world_size} processes equal shares of {n} pairs at "
                    f"max_tokens={self.max_tokens}; use fewer processes or a larger train.max_tokens"
                )
            half = len(batch) // 2
            batches[largest : largest + 1] = [batch[:half], batch[half:]]

        if self.shuffle:
            batches = [batches[k] for k in torch.randperm(len(batches), generator=generator).tolist()]
        return batches


def padding_fraction(sampler: TokenBatchSampler) -> float:
    """Fraction of padded positions (src and tgt together) over the sampler's current epoch."""
    padded = real = 0
    for batch in sampler.global_batches():
        src = [sampler.src_lengths[i] for i in batch]
        tgt = [sampler.tgt_lengths[i] for i in batch]
        padded += len(batch) * (max(src) + max(tgt))
        real += sum(src) + sum(tgt)
    return 1.0 - real / padded if padded else 0.0


# ------------------------------------------------------------------------------- collation


@dataclass
class Batch:
    """Padded tensors plus masks (bool, True = may attend, as in scaled_dot_product_attention)."""

    src: torch.Tensor  # (B, S) long
    tgt_in: torch.Tensor  # (B, T) long: BOS + pieces
    tgt_out: torch.Tensor  # (B, T) long: pieces + EOS, PAD where the loss must ignore
    src_mask: torch.Tensor  # (B, 1, 1, S): key is a real source token
    tgt_mask: torch.Tensor  # (B, 1, T, T): causal and key is a real target token
    src_tokens: int  # real (non-pad) tokens in src
    tgt_tokens: int  # real tokens in tgt_out, i.e. the loss's token count
    n_sentences: int

    def to(self, device: torch.device | str) -> Batch:
        tensors = ("src", "tgt_in", "tgt_out", "src_mask", "tgt_mask")
        return replace(self, **{name: getattr(self, name).to(device, non_blocking=True) for name in tensors})


def _pad(seqs: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, L) ids padded with PAD_ID and the (B, L) bool mask of real positions."""
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    width = int(lengths.max()) if len(seqs) else 0
    real = torch.arange(width) < lengths[:, None]
    ids = torch.full((len(seqs), width), PAD_ID, dtype=torch.long)
    # Boolean-mask assignment fills row-major, which is the order of the flattened sequences.
    ids[real] = torch.tensor([i for s in seqs for i in s], dtype=torch.long)
    return ids, real


def pad_sources(src_ids: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Source ids (B, S) and mask (B, 1, 1, S). Every sequence needs at least one id (EOS):
    an all-False mask row would make attention softmax over nothing (NaN)."""
    src, real = _pad(src_ids)
    return src, real[:, None, None, :]


def collate(src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]]) -> Batch:
    """Pad a batch and build its masks; ``tgt_ids`` carry BOS and EOS (see encode_split)."""
    if len(src_ids) != len(tgt_ids):
        raise ValueError(f"{len(src_ids)} sources but {len(tgt_ids)} targets")
    if any(len(t) < 2 for t in tgt_ids):
        raise ValueError("every target needs at least BOS and EOS")
    src, src_mask = pad_sources(src_ids)
    # Teacher forcing: predict token t+1 from tokens <= t, shifted per sentence before padding.
    tgt_in, in_real = _pad([t[:-1] for t in tgt_ids])
    tgt_out, out_real = _pad([t[1:] for t in tgt_ids])
    width = tgt_in.size(1)
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    # Key padding only: pad query rows still see BOS, so no row is fully masked.
    tgt_mask = causal[None, None] & in_real[:, None, None, :]
    return Batch(
        src=src,
        tgt_in=tgt_in,
        tgt_out=tgt_out,
        src_mask=src_mask,
        tgt_mask=tgt_mask,
        src_tokens=int(src_mask.sum()),
        tgt_tokens=int(out_real.sum()),
        n_sentences=len(src_ids),
    )


def iterate_batches(
    src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]], sampler: TokenBatchSampler
) -> Iterator[tuple[list[int], Batch]]:
    """(example indices, Batch) for each batch the sampler yields (honours start_at)."""
    for indices in sampler:
        yield indices, collate([src_ids[i] for i in indices], [tgt_ids[i] for i in indices])
