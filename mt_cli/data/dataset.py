"""Pairs encoded in memory, as the sampler and the loader see them: widths to batch by, ids to
collate; and the length rule every pair is held to.

Validation and ``mt bench`` keep their (small) pairs here. Training reads the prepared corpus on
disk (``prepared.PreparedCorpus``), which offers the same ``widths()`` and ``collate(indices)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
