"""What every engine returns, and the options it decodes with: typed, frozen, free of torch.

Scores are natural logarithms. A translation's ``score`` is the number its search ranks by: the
summed log-probability of its pieces and EOS, divided by ``length ** length_penalty`` (length
counting EOS; see ``hypotheses.length_penalty``), for greedy search, beam search and samples alike.
A ``Score`` of a given target is the plain sum, never length-normalised. Formatting these (Moses
n-best, Pharaoh, JSON) is the command line's business, not this module's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from mt_cli.errors import InputError

if TYPE_CHECKING:  # sampling imports torch; an annotation needs none of it
    from mt_cli.config.sections import DataConfig, DecodeConfig
    from mt_cli.decode.sampling import Sampling

# (source word, target word) pairs, 0-based over whitespace-separated words, sorted.
Alignment = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class TranslateOptions:
    """How to translate. ``None`` takes the model card's value (the decoding it was tuned with).

    ``sampling`` draws one translation per line instead of searching, so it needs beam 1 (left
    out, the beam is 1); ``align`` adds word alignments from the cross-attention of decoder layer
    ``alignment_layer`` (None: the last, fairseq's default; negative counts from the end).
    ``tgt_lang`` is the language to write (None: the card's ``data.tgt_lang``), one the model was
    trained to write; ``src_lang`` only checks that the model reads that language (and, with
    ``tgt_lang``, knows the direction): a source carries no tag, so it selects nothing.
    """

    beam: int | None = None
    n_best: int = 1
    length_penalty: float | None = None
    sampling: Sampling | None = None
    align: bool = False
    alignment_layer: int | None = None
    scores: bool = True  # False: greedy search leaves each score NaN (beam search needs them)
    tgt_lang: str | None = None
    src_lang: str | None = None

    def __post_init__(self) -> None:
        if self.beam is not None and self.beam < 1:
            raise InputError(f"beam size {self.beam} must be at least 1 (1 is greedy search)")
        if self.n_best < 1:
            raise InputError(f"n-best {self.n_best} must be at least 1")
        if self.length_penalty is not None and not 0.0 <= self.length_penalty < math.inf:
            raise InputError(f"length penalty {self.length_penalty} must be a number >= 0 (0 turns it off)")
        if self.sampling is not None and self.beam is not None and self.beam > 1:
            raise InputError(
                f"sampling draws one translation per line and cannot search with beam {self.beam}; "
                "use beam 1 or leave the beam out"
            )
        if self.sampling is not None and self.n_best > 1:
            raise InputError(f"sampling draws one translation per line, not an n-best list of {self.n_best}")
        if self.alignment_layer is not None and not self.align:
            raise InputError("an alignment layer needs alignments (--align)")

    def resolved(self, decode: DecodeConfig, data: DataConfig) -> TranslateOptions:
        """These options with the card's beam, length penalty and target language filled in,
        checked together."""
        beam = (1 if self.sampling is not None else decode.beam_size) if self.beam is None else self.beam
        alpha = decode.length_penalty if self.length_penalty is None else self.length_penalty
        if self.n_best > beam:
            raise InputError(f"n-best {self.n_best} cannot exceed the beam size {beam}")
        tgt_lang = target_language(data, self.tgt_lang, self.src_lang)
        return replace(self, beam=beam, length_penalty=alpha, tgt_lang=tgt_lang)

    @property
    def beam_size(self) -> int:
        """The beam of resolved options (``resolved`` fills it in)."""
        if self.beam is None:
            raise ValueError("options not resolved: the beam is the card's")
        return self.beam

    @property
    def alpha(self) -> float:
        """The length penalty of resolved options."""
        if self.length_penalty is None:
            raise ValueError("options not resolved: the length penalty is the card's")
        return self.length_penalty


DEFAULT_OPTIONS = TranslateOptions()  # the card's beam, length penalty and target language


def describe_directions(directions: Sequence[tuple[str, str]]) -> str:
    """``"de -> en, fr -> en"``: the directions a model knows, as messages name them."""
    return ", ".join(f"{src} -> {tgt}" for src, tgt in directions)


def target_language(data: DataConfig, tgt_lang: str | None = None, src_lang: str | None = None) -> str:
    """The language to write: ``tgt_lang``, or the card's ``data.tgt_lang``. An ``InputError``
    naming what the model knows if it was not trained to write it, if ``src_lang`` is given and
    it was not trained to read that, or if it does not know the direction ``src_lang`` -> it."""
    sources, targets = data.languages()
    tgt = data.tgt_lang if tgt_lang is None else tgt_lang
    if tgt not in targets:
        raise InputError(
            f"target language {tgt!r} is not one this model writes; it writes {', '.join(targets)}"
        )
    if src_lang is not None:
        if src_lang not in sources:
            raise InputError(
                f"source language {src_lang!r} is not one this model reads; it reads {', '.join(sources)}"
            )
        if (src_lang, tgt) not in data.directions():
            raise InputError(
                f"{src_lang} -> {tgt} is not a direction this model was trained on; "
                f"it knows {describe_directions(data.directions())}"
            )
    return tgt


@dataclass(frozen=True)
class Hypothesis:
    """One translation of a line: detokenized text, its target pieces (without EOS), its score
    (see the module docstring) and, when asked for, its word alignment to the source."""

    text: str
    tokens: tuple[str, ...]
    score: float
    alignment: Alignment | None = None


@dataclass(frozen=True)
class Translation:
    """A source line and its hypotheses, best first (one unless an n-best list was asked for).
    An empty line has one empty hypothesis."""

    source: str
    hypotheses: tuple[Hypothesis, ...]

    @property
    def best(self) -> Hypothesis:
        return self.hypotheses[0]

    @property
    def text(self) -> str:
        return self.hypotheses[0].text


@dataclass(frozen=True)
class Score:
    """The model's log-probability of ``target`` given ``source``, in the training tokenization
    (target pieces, then EOS) and without label smoothing: ``log_prob`` sums the ``tokens``
    log-probabilities (EOS included); ``per_token`` lists each piece ("</s>" last) with its own."""

    source: str
    target: str
    log_prob: float
    tokens: int
    per_token: tuple[tuple[str, float], ...] | None = None

    @property
    def mean_log_prob(self) -> float:
        """Per-token log-probability: ``log_prob / tokens``."""
        return self.log_prob / self.tokens

    @property
    def nll(self) -> float:
        """Mean negative log-likelihood per token (the cross-entropy training reports as val loss)."""
        return -self.mean_log_prob
