"""How to decode: ``TranslateOptions`` (with ``Sampling``), the one decoding-options type.

The command line, the Python API, ``mt serve`` and a back-translation corpus's ``decode:`` block
all build one, and every engine takes one. Each option's rule is checked here, once, as the
options are made: a bad value is an ``OptionError`` naming the option, which the command line
prints as it is and a recipe (``schema.build``) turns into a ``ConfigError`` naming its key
(``data.corpora[1].decode.beam: ...``). What needs the model (its default beam, length
penalty and target language, and the widest beam its target vocabulary allows) is filled in
and checked by ``resolved``, once: an engine's ``resolve`` calls it where options come in, and
every layer below (the API, the engine, its searches) passes resolved options on as they are.
Free of torch: the search that samples is ``decode.sampling``.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

from mt_cli.errors import InputError


class OptionError(InputError):
    """A decoding option with a value it cannot take; ``key`` names it as a recipe spells it
    (``beam``, ``top_k``: a field of ``TranslateOptions`` or ``Sampling``)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class Sampling:
    """How to sample: each step divides the logits by ``temperature``, keeps the ``top_k`` most
    probable tokens (None: all), then the smallest set of those whose probability reaches
    ``top_p`` (1.0: all), and draws from what is left, renormalised.

    ``temperature`` 0 means no randomness: the most probable token, i.e. greedy search.
    ``seed`` is combined with each line's text by ``decode.sampling.line_seed``.
    """

    top_k: int | None = None
    top_p: float = 1.0
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.top_k is not None and (isinstance(self.top_k, bool) or self.top_k < 1):
            raise OptionError(
                "top_k", f"top-k {self.top_k} must be at least 1 (leave it out to keep every token)"
            )
        if not 0.0 < self.top_p <= 1.0:  # also catches NaN
            raise OptionError("top_p", f"top-p {self.top_p} must be in (0, 1] (1 keeps every token)")
        if not 0.0 <= self.temperature < math.inf:  # also catches NaN
            raise OptionError(
                "temperature", f"temperature {self.temperature} must be a number >= 0 (0 means greedy)"
            )


class GlossaryMode(str, enum.Enum):
    """How a glossary's terms reach the translation: told to the model in the source (``append``,
    a model trained with ``data.terms``), or also forced by constrained beam search
    (``guarantee``, mt's engine, any of its models)."""

    APPEND = "append"
    GUARANTEE = "guarantee"


class Terms(Protocol):
    """A user's glossary as translation uses it (``text.glossary.Glossary``; config never imports
    text): its languages, and the matches of its terms in a sentence."""

    src_lang: str
    tgt_lang: str

    def find(self, sentence: str) -> list[Any]: ...


@dataclass(frozen=True)
class TranslateOptions:
    """How to translate. ``None`` takes the model card's value (the decoding it was tuned with).

    ``sampling`` draws one translation per line instead of searching, so it needs beam 1 (left
    out, the beam is 1); ``align`` adds word alignments from the cross-attention of decoder layer
    ``alignment_layer`` (None: the last, fairseq's default; negative counts from the end).
    ``tgt_lang`` is the language to write (None: the card's ``data.tgt_lang``), one the model was
    trained to write; ``src_lang`` only checks that the model reads that language (and, with
    ``tgt_lang``, knows the direction): a source carries no tag, so it selects nothing.
    ``placeholders``: hide ``{{...}}``, ``%s``, URLs and the like from the model and put them back
    after (``text.placeholders``); None: where the model was trained with them. ``glossary``: the
    user's terms, annotated in the sources (``text.terms``) for a model trained with ``data.terms``;
    with ``glossary_mode`` guarantee also forced into the output (``decode.constrained``).
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
    placeholders: bool | None = None
    glossary: Terms | None = None
    glossary_mode: GlossaryMode = GlossaryMode.APPEND
    # True on what ``resolved`` returns (and ``without_scores`` of it), set on the instance as it is
    # made: not a field, so ``replace`` makes options to resolve anew and a recipe never holds it.
    _resolved: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.beam is not None and self.beam < 1:
            raise OptionError("beam", f"beam size {self.beam} must be at least 1 (1 is greedy search)")
        if self.n_best < 1:
            raise OptionError("n_best", f"n-best {self.n_best} must be at least 1")
        if self.length_penalty is not None and not 0.0 <= self.length_penalty < math.inf:
            raise OptionError(
                "length_penalty",
                f"length penalty {self.length_penalty} must be a number >= 0 (0 turns it off)",
            )
        if self.sampling is not None and self.beam is not None and self.beam > 1:
            raise OptionError(
                "beam",
                f"sampling draws one translation per line and cannot search with beam {self.beam}; "
                "use beam 1 or leave the beam out",
            )
        if self.sampling is not None and self.n_best > 1:
            raise OptionError(
                "n_best", f"sampling draws one translation per line, not an n-best list of {self.n_best}"
            )
        if self.glossary_mode is GlossaryMode.GUARANTEE and self.sampling is not None:
            raise OptionError("glossary_mode", "guaranteed terms need a search, not sampling")
        if self.alignment_layer is not None and not self.align:
            raise OptionError("alignment_layer", "an alignment layer needs alignments (--align)")

    def resolved(
        self, beam: int, length_penalty: float, tgt_lang: str, vocabulary: int | None = None
    ) -> TranslateOptions:
        """These options with a model's defaults filled in (its ``beam`` and ``length_penalty``;
        ``tgt_lang``: the language to write, already checked against what it writes), checked
        together and, given the size of its target ``vocabulary``, against it: beam search
        ranks the best 2 * beam extensions of each hypothesis, so the beam is at most half the
        vocabulary."""
        beam = (1 if self.sampling is not None else beam) if self.beam is None else self.beam
        alpha = length_penalty if self.length_penalty is None else self.length_penalty
        if self.n_best > beam:
            raise OptionError("n_best", f"n-best {self.n_best} cannot exceed the beam size {beam}")
        if vocabulary is not None and 2 * beam > vocabulary:
            raise OptionError(
                "beam",
                f"beam size {beam} is too wide for this model: its target vocabulary of {vocabulary} "
                f"pieces allows a beam of at most {vocabulary // 2}",
            )
        return _marked_resolved(replace(self, beam=beam, length_penalty=alpha, tgt_lang=tgt_lang))

    def without_scores(self) -> TranslateOptions:
        """These options with ``scores`` off, resolved if these were (resolution never reads it)."""
        if not self.scores:
            return self
        unscored = replace(self, scores=False)
        return _marked_resolved(unscored) if self.is_resolved else unscored

    def with_glossary(self, glossary: Terms | None, mode: GlossaryMode | None = None) -> TranslateOptions:
        """These options with ``glossary`` (None: without one) and its ``mode`` (None: as it is),
        resolved if these were: a glossary is read once the languages are known, and the sources
        it annotated decode without it."""
        mode = self.glossary_mode if mode is None else mode
        if glossary is self.glossary and mode is self.glossary_mode:
            return self
        changed = replace(self, glossary=glossary, glossary_mode=mode)
        return _marked_resolved(changed) if self.is_resolved else changed

    def record(self) -> dict[str, Any]:
        """These options as data (a synthetic corpus's key and provenance): every field but those
        mt added later at their defaults, so that an existing corpus's key stays what it was."""
        data = dataclasses.asdict(self)
        for name, default in _LATER_DEFAULTS.items():
            if data[name] == default:
                del data[name]
        return data

    @property
    def is_resolved(self) -> bool:
        """Whether a model filled these in and checked them (``resolved``): they pass on as they are."""
        return self._resolved

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


# Fields added after synthetic corpora were first keyed by their options, and their defaults.
_LATER_DEFAULTS: dict[str, Any] = {
    "placeholders": None,
    "glossary": None,
    "glossary_mode": GlossaryMode.APPEND,
}


def _marked_resolved(options: TranslateOptions) -> TranslateOptions:
    """``options`` (new ones, made by ``replace``) marked as resolved."""
    object.__setattr__(options, "_resolved", True)  # frozen: set once, as it is made
    return options


DEFAULT_OPTIONS = TranslateOptions()  # the card's beam, length penalty and target language
