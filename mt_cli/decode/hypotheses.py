"""What every search shares, below all of them: the ``Decoder`` a search runs, the ``Found``
hypothesis it returns, and the two length rules (how long an output may be, how its score is
normalised), each stated once here for mt's searches, CTranslate2's and the exports.

``Found`` is a search's own result (token ids); ``results.Hypothesis`` is what a caller gets
(text, pieces, score, alignment).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from torch import Tensor


class Decoder(Protocol):
    """What the searches, forced decoding and alignment use of a model: a ``Transformer`` or an
    ``Ensemble``. The memory from ``encode`` and the cache are the model's own business: the
    searches only hand them back, and call the cache's ``expand_beams``, ``reorder`` and
    ``select`` (the methods of ``DecoderCache``)."""

    max_positions: int

    def encode(self, src: Tensor, src_mask: Tensor) -> Any: ...

    def start_cache(self, memory: Any, src_mask: Tensor) -> Any: ...

    def step(
        self, tokens: Tensor, cache: Any, return_attention: bool = False, attention_layer: int | None = None
    ) -> tuple[Tensor, Any, Tensor | None]:
        """fp32 next-token scores (N, V) whose log_softmax is the model's log-probability."""
        ...

    def decode(self, tgt_in: Tensor, memory: Any, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        """Teacher-forced scores (B, T, V), the same as ``step``'s position by position."""
        ...


@dataclass(frozen=True)
class Found:
    """One output of a search."""

    tokens: list[int]  # without BOS and EOS
    score: float  # sum of log-probabilities divided by the length penalty (see ``normalised``)


def length_penalty(length: int, alpha: float) -> float:
    """|Y| ** alpha, |Y| counting EOS: a finished hypothesis's summed log-probability is divided by
    it. The convention of CTranslate2, fairseq and Hugging Face, so ``--length-penalty`` means the
    same in every engine and an export decodes mt's beams; alpha 0 turns it off."""
    return float(length) ** alpha


def normalised(total: float, tokens: int, alpha: float) -> float:
    """The score of an output of ``tokens`` pieces (EOS not counted) whose summed log-probability,
    EOS included, is ``total``: as beam search ranks its finished hypotheses. Greedy search and
    sampling are scored the same way, so that a score means the same whatever found it."""
    return total / length_penalty(tokens + 1, alpha)


def per_piece(score: float, tokens: int, alpha: float) -> float:
    """The mean log-probability per piece, EOS included, of an output of ``tokens`` pieces that
    ``normalised`` scored ``score`` with length penalty ``alpha``: a score that means the same
    whatever the length penalty (what a distilled corpus's ``min_score`` compares with)."""
    length = tokens + 1
    return score * length_penalty(length, alpha) / length


# The output-length rule: at most ``max_len_a * source length + max_len_b`` generated tokens
# (EOS included; the source length counts its EOS), at least 1, within the positions after BOS.
# Two forms of the one rule: per line (CTranslate2 and the exports, in float64) and per batch
# (mt's searches, on the device in float32); each keeps the arithmetic its engine always used.


def output_limit(source_length: int, max_len_a: float, max_len_b: int, max_positions: int) -> int:
    """Most tokens generated for a source of ``source_length`` pieces (EOS included on both)."""
    return min(max(1, math.floor(max_len_a * source_length) + max_len_b), max_positions - 1)


def max_output_lengths(model: Decoder, src_mask: Tensor, a: float, b: int) -> Tensor:
    """``output_limit`` of each source of a batch (``src_mask`` (B, 1, 1, S)): (B,)."""
    src_lengths = src_mask.view(src_mask.size(0), -1).sum(-1)  # (B,)
    limit = (a * src_lengths.float()).floor().long() + b
    return limit.clamp(min=1, max=model.max_positions - 1)  # BOS takes one position
