"""Which training pairs are kept: fairseq's clean-corpus rules on piece counts, exact duplicates,
and the count of what each rule dropped (the prepare report and the manifest print it)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np


@dataclass
class Filtered:
    """What the filters dropped, by reason; the prepare report prints each count."""

    undecodable: int = 0  # a side is not UTF-8
    empty: int = 0  # a side is empty or blank
    too_long: int = 0  # a side has more than data.max_len pieces
    ratio: int = 0  # one side is more than data.max_length_ratio times longer (pieces)
    duplicate: int = 0  # the same pair (both sides) was kept earlier (data.dedupe)
    score: int = 0  # its teacher scored it under the entry's min_score (before the rules above)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def describe(self) -> str:
        """e.g. "not UTF-8 0, empty 0, longer than data.max_len 12, over data.max_length_ratio 0,
        duplicate 0" (and ", under min_score N" when a teacher's score left pairs out)."""
        return (
            f"not UTF-8 {self.undecodable:,}, empty {self.empty:,}, "
            f"longer than data.max_len {self.too_long:,}, over data.max_length_ratio {self.ratio:,}, "
            f"duplicate {self.duplicate:,}" + (f", under min_score {self.score:,}" if self.score else "")
        )


@dataclass(frozen=True)
class PairFilter:
    """fairseq's clean-corpus rules on piece counts: at most ``max_len`` per side, and no side
    more than ``max_ratio`` times as long as the other (None: no ratio rule). With ``dedupe``, a
    pair equal to one kept earlier goes too (``SeenPairs``, applied after these rules)."""

    max_len: int
    max_ratio: float | None
    dedupe: bool = False

    def keep(
        self, src: Sequence[np.ndarray], tgt: Sequence[np.ndarray], texts, counts: Filtered
    ) -> np.ndarray:
        """Boolean (N,): which pairs survive; ``counts`` grows by the dropped ones, each counted once."""
        src_len = np.fromiter((len(ids) for ids in src), np.int64, len(src))
        tgt_len = np.fromiter((len(ids) for ids in tgt), np.int64, len(tgt))
        texts = list(texts)
        broken = np.fromiter((s is None or t is None for s, t in texts), bool, len(texts))
        # blank: either side empty, whitespace only or undecodable (None)
        blank = np.fromiter((not (s and s.strip() and t and t.strip()) for s, t in texts), bool, len(texts))
        long = ~blank & ((src_len > self.max_len) | (tgt_len > self.max_len))
        skewed = np.zeros_like(blank)
        if self.max_ratio is not None:
            shorter = np.maximum(np.minimum(src_len, tgt_len), 1)
            skewed = ~blank & ~long & (np.maximum(src_len, tgt_len) > self.max_ratio * shorter)
        counts.undecodable += int(broken.sum())
        counts.empty += int((blank & ~broken).sum())
        counts.too_long += int(long.sum())
        counts.ratio += int(skewed.sum())
        return ~(blank | long | skewed)


class SeenPairs:
    """Exact duplicates (both sides byte-equal), found by a 64-bit hash per kept pair: 8 bytes a
    pair in one sorted array, where a Python set would take ~80. Two different pairs share a
    hash with probability ~n^2 / 2^65 (about 2e-5 at 30M pairs): one pair wrongly dropped."""

    def __init__(self) -> None:
        self.hashes = np.zeros(0, np.uint64)  # sorted

    def first_seen(self, texts: Sequence[tuple[str, str]]) -> np.ndarray:
        """Boolean (N,): which pairs were not seen before (in earlier calls or earlier in ``texts``)."""
        hashes = np.fromiter((_pair_hash(src, tgt) for src, tgt in texts), np.uint64, len(texts))
        new = np.zeros(len(hashes), bool)
        new[np.unique(hashes, return_index=True)[1]] = True  # first occurrence within this chunk
        if len(self.hashes):
            at = np.minimum(np.searchsorted(self.hashes, hashes), len(self.hashes) - 1)
            new &= self.hashes[at] != hashes
        # Two sorted runs: the stable sort (timsort for 64-bit keys) merges them in linear time.
        self.hashes = np.sort(np.concatenate([self.hashes, np.sort(hashes[new])]), kind="stable")
        return new


def _pair_hash(src: str, tgt: str) -> int:
    data = f"{len(src)}:{src}{tgt}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def encodable(lines: list[str | None]) -> list[str]:
    """Lines to encode: an undecodable one (None) as empty (the filter drops its pair anyway)."""
    return ["" if line is None else line for line in lines]
