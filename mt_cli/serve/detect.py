"""Which language a text is in, for ``POST /detect`` and ``source: "auto"``: lingua's n-gram
models (lingua-language-detector, in the ``serve`` extra; its models are inside the wheel, so
nothing is downloaded) over all 75 languages it knows, the model's own languages weighted up.

lingua settles a text outright where a rule can (a letter only one language writes, such as
Czech "ř"); otherwise its value for a language is a softmax of the text's character 1- to
5-gram log-probabilities per character (trigrams alone from 120 characters on), which hardly
grows more certain as a text grows longer. ``Detector.weigh`` turns it into a posterior that
sharpens with length as a likelihood does: log p = SHARPNESS * letters * log v, plus log
OWN_WEIGHT for each of the model's languages (every source and target of its directions: a
text sent to this server is likelier in one of them), normalised. Every language is a
candidate, so text in a language the model does not read is named as what it is (English sent
to a de -> en model answers ``en``) and ``source: "auto"`` refuses it with a 400, never
translating it as the model's source. SHARPNESS was fitted on Multi30k's val split (log loss),
OWN_WEIGHT chosen there on 1-3 word inputs; the accuracy is measured on test2016
(``scripts/detect-accuracy.py``, docs/results.md). A confidence is p in percent, LibreTranslate's
scale.

A model language is matched to lingua's by its primary subtag (``pt_BR`` is Portuguese, ``deu``
German by its ISO 639-3 code) and answered with the model's own code; two codes of one language
cannot be told apart (the first is answered). A model with a source lingua does not know cannot
be checked at all: ``auto`` is then its first source at confidence 0, as for a text with no
letters. A model of one source language has no source to choose, so ``auto`` means that one,
but the text is still inspected: text in another language is refused as for any model. The
models load at the first detection (a few seconds; about 0.9 GB once every Latin-script
language is in, shared by every detector in the process), not at startup, so a server never
asked to detect does not pay for them.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mt_cli.config.card import describe_directions
from mt_cli.serve.errors import ApiError
from mt_cli.serve.scope import Scope

if TYPE_CHECKING:
    import lingua

# Both chosen on Multi30k's val split (scripts/detect-accuracy.py --tune, docs/results.md):
SHARPNESS = 0.4  # lingua's value to the power SHARPNESS * letters: the best log loss
OWN_WEIGHT = 10.0  # prior odds of each of the model's languages against any other language
CANDIDATES = 3  # languages /detect lists, best first
_PRIMARY = re.compile(r"[a-z]{2,3}")  # a model code's primary subtag: "pt" of "pt_BR"
_SENTENCE_END = re.compile(r"(?<=[.!?;。！？])\s+|\s*\n\s*")  # where /detect cuts a text into sentences


@dataclass(frozen=True)
class Guess:
    """A language a text may be in: its code (the model's own where it is one of the model's
    languages, else ISO 639-1), its English name and the confidence in percent (0: not inspected)."""

    language: str
    name: str
    confidence: float

    def answer(self) -> dict[str, Any]:
        """LibreTranslate's ``{"confidence", "language"}``."""
        return {"confidence": round(self.confidence, 2), "language": self.language}

    def describe(self) -> str:
        """``"English (en, confidence 97.12)"``, as messages name it."""
        return f"{self.name} ({self.language}, confidence {self.confidence:.2f})"


class Detector:
    """Ranks the languages of a text for a model of ``languages`` (its sources and targets, in
    the order of its directions). Safe to call from several threads; loads lingua's models once."""

    def __init__(
        self, languages: Sequence[str], weight: float = OWN_WEIGHT, sharpness: float = SHARPNESS
    ) -> None:
        self.languages = tuple(dict.fromkeys(languages))
        self.weight = weight
        self.sharpness = sharpness
        self._known = {code: language for code in self.languages if (language := _lingua_language(code))}
        # The model's code for each lingua language it knows, the first where two codes share one.
        self._own: dict[lingua.Language, str] = {}
        for code, language in self._known.items():
            self._own.setdefault(language, code)
        self._lingua: lingua.LanguageDetector | None = None
        self._lock = threading.Lock()

    def knows(self, code: str) -> bool:
        """Whether text in the model's language ``code`` can be told from text in other languages."""
        return code in self._known

    def rank(self, text: str) -> list[Guess]:
        """Every language with a confidence above 0, best first; empty for a text with no letters.

        A text of several sentences (or lines) is weighed a sentence at a time: where every
        sentence's likeliest language is the same, their evidence adds up as one text's would;
        where they differ, the text is in several languages, and a language's confidence is its
        share of the text (each sentence's confidence in it, weighted by its letters), so the
        language of most of the text comes first at the confidence its share earns."""
        parts = [(part, values) for part in _sentences(text) if (values := self.lingua_values(part))]
        if len(parts) <= 1:
            return self.weigh(*parts[0]) if parts else []
        each = [self.weigh(part, values) for part, values in parts]
        if len({ranked[0].language for ranked in each}) == 1:
            return self._normalised(_joint([self._likelihoods(part, values) for part, values in parts]))
        return _mixture([(_letters(part), ranked) for (part, _), ranked in zip(parts, each)])

    def lingua_values(self, text: str) -> list[tuple[lingua.Language, float]]:
        """lingua's confidence values for ``text``: every language it has not ruled out, summing
        to 1 (none for a text with no letters)."""
        values = self._detector().compute_language_confidence_values(text)
        return [(value.language, value.value) for value in values if value.value > 0]

    def weigh(self, text: str, values: Sequence[tuple[lingua.Language, float]]) -> list[Guess]:
        """``values`` of ``text`` sharpened by its length and weighted to the model's languages:
        log p = sharpness * letters * log v (+ log weight for a model language), normalised."""
        return self._normalised(self._likelihoods(text, values))

    def _likelihoods(
        self, text: str, values: Sequence[tuple[lingua.Language, float]]
    ) -> dict[lingua.Language, float]:
        """log p of ``text`` for each language in ``values``, before the weight: sharpness *
        letters * log v."""
        letters = max(_letters(text), 1)
        return {language: self.sharpness * letters * math.log(value) for language, value in values}

    def _normalised(self, logs: dict[lingua.Language, float]) -> list[Guess]:
        """The languages of ``logs`` (log p, each model language's weight added here), best first,
        with confidences in percent that sum to 100."""
        if not logs:
            return []
        weighted = [(language, log + self._log_weight(language)) for language, log in logs.items()]
        top = max(log for _, log in weighted)
        scores = [(language, math.exp(log - top)) for language, log in weighted]  # the best: 1
        total = sum(score for _, score in scores)
        ranked = sorted(scores, key=lambda item: -item[1])  # stable: lingua's order among ties
        return [
            Guess(self._code(language), language.name.title(), 100 * score / total)
            for language, score in ranked
        ]

    def _log_weight(self, language: lingua.Language) -> float:
        return math.log(self.weight) if language in self._own else 0.0

    def _code(self, language: lingua.Language) -> str:
        return self._own.get(language) or language.iso_code_639_1.name.lower()

    def _detector(self) -> lingua.LanguageDetector:
        with self._lock:
            if self._lingua is None:
                from lingua import LanguageDetectorBuilder

                self._lingua = LanguageDetectorBuilder.from_all_languages().build()
            return self._lingua


def _sentences(text: str) -> list[str]:
    """``text`` cut after each sentence's final punctuation and at each line break."""
    return [part for part in _SENTENCE_END.split(text) if part.strip()]


def _letters(text: str) -> int:
    return sum(char.isalpha() for char in text)


def _joint(parts: Sequence[dict[lingua.Language, float]]) -> dict[lingua.Language, float]:
    """log p of several sentences in one language: the sum of theirs, for each language that no
    sentence rules out."""
    common = set(parts[0]).intersection(*parts[1:])
    return {language: sum(logs[language] for logs in parts) for language in parts[0] if language in common}


def _mixture(parts: Sequence[tuple[int, list[Guess]]]) -> list[Guess]:
    """Each language's share of a text of several languages: its confidence in each sentence,
    weighted by the sentence's letters; best first."""
    total = sum(letters for letters, _ in parts)
    shares: dict[tuple[str, str], float] = {}
    for letters, ranked in parts:
        for guess in ranked:
            key = (guess.language, guess.name)
            shares[key] = shares.get(key, 0.0) + guess.confidence * letters / total
    ranked_shares = sorted(shares.items(), key=lambda item: -item[1])  # stable: first seen among ties
    return [Guess(language, name, share) for (language, name), share in ranked_shares]


def _lingua_language(code: str) -> lingua.Language | None:
    """lingua's language for a model's code (by its primary subtag), or None if it has none."""
    from lingua import IsoCode639_1, IsoCode639_3, Language

    primary = _PRIMARY.match(code)
    if primary is None:
        return None
    subtag = primary.group(0)
    try:
        if len(subtag) == 2:
            return Language.from_iso_code_639_1(IsoCode639_1.from_str(subtag))
        return Language.from_iso_code_639_3(IsoCode639_3.from_str(subtag))
    except ValueError:  # a code lingua has no language for
        return None


def detect(detector: Detector, text: str, scope: Scope) -> list[Guess]:
    """``/detect``'s answer: the ``CANDIDATES`` likeliest languages, or the model's first source
    at confidence 0 for a text with no letters or a model whose sources cannot be checked."""
    ranked = [
        guess for guess in rank_if_usable(detector, text, scope)[:CANDIDATES] if guess.answer()["confidence"]
    ]
    return ranked or [_unchecked(scope.source)]


def auto_sources(detector: Detector, texts: Sequence[str], target: str, scope: Scope) -> list[Guess]:
    """The source language of each text of a ``source: "auto"`` request into ``target``: its
    likeliest language if the model translates that into ``target``, else a 400 naming the
    language found and the directions the server has; the default source at confidence 0 for a
    text that cannot be checked (no letters in it, or a source lingua does not know)."""
    found = []
    for index, text in enumerate(texts):
        ranked = rank_if_usable(detector, text, scope)
        if not ranked:
            found.append(_unchecked(_default_source(scope, target)))
            continue
        best = ranked[0]
        if (best.language, target) not in scope.directions:
            raise _cannot_translate("q" if len(texts) == 1 else f"q[{index}]", best, target, scope)
        found.append(best)
    return found


def _cannot_translate(where: str, found: Guess, target: str, scope: Scope) -> ApiError:
    """The 400 for text in a language the model does not translate into ``target``."""
    what = f"{found.language} -> {target}" if found.language in scope.sources else f"from {found.language}"
    knows = f"it translates {describe_directions(scope.directions)}"
    return ApiError(
        400, f"{where} looks like {found.describe()}: this model cannot translate {what}; {knows}"
    )


def rank_if_usable(detector: Detector, text: str, scope: Scope) -> list[Guess]:
    """``detector.rank(text)``, or nothing if any of the model's sources is one it cannot tell."""
    if not all(detector.knows(source) for source in scope.sources):
        return []
    return detector.rank(text)


def _default_source(scope: Scope, target: str) -> str:
    """The first source the model translates into ``target`` (``parse`` checked there is one)."""
    return next(src for src, tgt in scope.directions if tgt == target)


def _unchecked(language: str) -> Guess:
    return Guess(language, language, 0.0)
