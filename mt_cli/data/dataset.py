"""The training pairs as the sampler and the loader see them: widths to batch by, ids to collate.

The trainer never holds the corpus itself. At each epoch it asks a pair source for that epoch's
``EncodedPairs``: always the same ones (``FixedPairs``), or drawn anew with BPE-dropout
(``ResegmentedPairs``, which keeps the text instead of a second copy of the ids). The sampler
takes their ``widths()``; the loop takes ``collate(indices)``. A memory-mapped corpus is one
more pair source behind the same two calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from mt_cli.data.batch import Batch, collate, source_ids, target_ids
from mt_cli.text.tokenizer import Tokenizer


@dataclass(frozen=True)
class EncodedPairs:
    src: list[list[int]]  # source ids + EOS
    tgt: list[list[int]]  # BOS + target ids + EOS

    def __len__(self) -> int:
        return len(self.src)

    def widths(self) -> tuple[list[int], list[int]]:
        """Per pair: the widths ``collate`` gives the source and the decoder input/target."""
        return [len(ids) for ids in self.src], [len(ids) - 1 for ids in self.tgt]

    def collate(self, indices: Sequence[int]) -> Batch:
        return collate([self.src[i] for i in indices], [self.tgt[i] for i in indices])


def encode_pairs(
    src_text: Sequence[str], tgt_text: Sequence[str], src_tok: Tokenizer, tgt_tok: Tokenizer
) -> EncodedPairs:
    return EncodedPairs(
        [source_ids(ids) for ids in src_tok.encode(src_text)],
        [target_ids(ids) for ids in tgt_tok.encode(tgt_text)],
    )


def within_max_len(src_width: int, tgt_width: int, max_len: int) -> bool:
    """At most ``max_len`` pieces per side, specials not counted (widths as ``widths()`` gives them).

    That is: len(src ids) <= max_len + 1 (EOS) and len(tgt ids) <= max_len + 2 (BOS, EOS), so
    every tensor the model sees is at most max_len + 1 wide.
    """
    return src_width <= max_len + 1 and tgt_width <= max_len + 1


def short_enough(pairs: EncodedPairs, max_len: int) -> list[int]:
    """Indices of the pairs that are ``within_max_len`` (training drops the others; evaluation never)."""
    return [
        i for i, widths in enumerate(zip(*pairs.widths(), strict=True)) if within_max_len(*widths, max_len)
    ]


class PairSource(Protocol):
    def epoch(self, seed: int) -> EncodedPairs:
        """The pairs to train on in the epoch that ``seed`` stands for."""
        ...


@dataclass(frozen=True)
class FixedPairs:
    """One segmentation for every epoch."""

    pairs: EncodedPairs

    def epoch(self, seed: int) -> EncodedPairs:
        return self.pairs


@dataclass(frozen=True)
class ResegmentedPairs:
    """BPE-dropout (Provilkov et al. 2020): every epoch segments the text anew, seeded.

    A side with dropout 0 keeps one fixed segmentation. Dropped merges lengthen a sentence; a
    pair that would grow past ``max_len`` pieces keeps its fixed pieces, so the set of trained
    pairs never changes. The same seed gives the same pieces, so a resumed epoch sees the
    batches it started with.
    """

    src_text: list[str]
    tgt_text: list[str]
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    src_dropout: float
    tgt_dropout: float
    max_len: int

    def epoch(self, seed: int) -> EncodedPairs:
        src = self._side(self.src_text, self.src_tok, self.src_dropout, seed, source_ids)
        tgt = self._side(self.tgt_text, self.tgt_tok, self.tgt_dropout, seed + 1, target_ids)
        sampled = EncodedPairs(src, tgt)
        kept = set(short_enough(sampled, self.max_len))
        for i in (i for i in range(len(sampled)) if i not in kept):
            fixed = encode_pairs([self.src_text[i]], [self.tgt_text[i]], self.src_tok, self.tgt_tok)
            src[i], tgt[i] = fixed.src[0], fixed.tgt[0]
        return sampled

    @staticmethod
    def _side(texts: list[str], tok: Tokenizer, dropout: float, seed: int, add_specials) -> list[list[int]]:
        pieces = tok.encode_with_dropout(texts, dropout, seed) if dropout else tok.encode(texts)
        return [add_specials(ids) for ids in pieces]
