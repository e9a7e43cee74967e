"""The loss weight of annotated terms (``train.term_loss_weight``; Ailem et al. 2021): in a run
trained with terms (``text.terms``), the target pieces that write a term the source announces
weigh more in the loss, so that the model learns to copy what follows ``<to>`` and not only to
read it.

A term's target pieces are found in the target by their ids: the source carries them between
``<to>`` and ``</term>``, and a joint tokenizer (which the rule asks for) cuts a word into the same
pieces on both sides. The reference may inflect the term ("ladders" for "ladder"): its first
pieces still match, and those weigh more. The space before ``</term>`` is a piece of its own
("▁"), which the term's pieces leave out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch

from mt_cli.data.batch import Batch
from mt_cli.specials import WORD_START
from mt_cli.text import terms
from mt_cli.text.pieces import Tokenizer


@dataclass(frozen=True)
class TermWeights:
    """Sets ``Batch.tgt_weight``: ``weight`` on the target pieces of an annotated term, 1 elsewhere."""

    to_id: int  # the piece of "<to>"
    end_id: int  # the piece of "</term>"
    space_id: int  # the piece of a lone word start, "▁"
    weight: float

    @classmethod
    def of(cls, source_tokenizer: Tokenizer, weight: float) -> TermWeights:
        ids = source_tokenizer.to_ids([terms.TO, terms.END, WORD_START])
        return cls(*ids, weight)

    def __call__(self, batch: Batch) -> Batch:
        """``batch`` with its target weights (on the CPU, before the batch is padded or moved)."""
        weights = torch.ones(batch.tgt_out.shape)  # (B, T)
        annotated = (batch.src == self.to_id).any(1).nonzero().flatten().tolist()
        for row in annotated:
            target = batch.tgt_out[row].tolist()
            for term in self._terms(batch.src[row].tolist()):
                for start in _occurrences(target, term):
                    weights[row, start : start + len(term)] = self.weight
        return replace(batch, tgt_weight=weights)

    def _terms(self, source: list[int]) -> Iterator[list[int]]:
        """The target terms a source announces: the pieces between each ``<to>`` and its ``</term>``."""
        start = None
        for position, piece in enumerate(source):
            if piece == self.to_id:
                start = position + 1
            elif piece == self.end_id and start is not None:
                end = position - 1 if source[position - 1] == self.space_id else position
                if end > start:
                    yield source[start:end]
                start = None


def _occurrences(sequence: list[int], part: list[int]) -> Iterator[int]:
    """Where ``part`` starts in ``sequence``, each place once."""
    first, width = part[0], len(part)
    for start in range(len(sequence) - width + 1):
        if sequence[start] == first and sequence[start : start + width] == part:
            yield start
