"""Sentence boundaries in running text, from sentencex (the ``documents`` extra).

sentencex (Wikimedia's sentence segmenter) was chosen because it is maintained, has rules for
German, English, French and Czech (and some 300 languages more, falling back along a chain of
related languages), carries its abbreviation lists inside the package (nothing is downloaded,
ever), and keeps every character: its sentences joined give back the text, so the whitespace
between sentences is kept exactly. pysbd has no Czech and has not been released since 2021;
NLTK's Punkt needs its models downloaded; Moses' splitter (sentence-splitter) rewrites
whitespace. docs/results.md has its boundary accuracy on Multi30k's test2016 paragraphs.

A sentence here is a span of the text without the whitespace around it; a span with no letter in
it (a number, a dash, an emoji) is not a sentence to translate and is kept as written. sentencex
sees every whitespace character as a plain space: a line break inside a text is no boundary (the
formats split lines themselves), and sentencex 1.0.32 panics on a space of several UTF-8 bytes
before a period (``"X\\u00a0."``). One character for one keeps every offset.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from mt_cli.errors import InputError

Span = tuple[int, int]  # [start, end) of a sentence in its text, no whitespace at either end
Segmenter = Callable[[str, str], list[str]]  # (language, text) -> pieces that join back to the text


def segmenter() -> Segmenter:
    """sentencex's ``segment`` as a list, or an InputError saying which extra to install."""
    try:
        import sentencex
    except ImportError:
        raise InputError(
            'splitting text into sentences needs the sentencex package: pip install -e ".[documents]"'
        ) from None

    def segment(language: str, text: str) -> list[str]:
        return list(sentencex.segment(language, _plain_spaces(text)))

    return segment


def _plain_spaces(text: str) -> str:
    return "".join(" " if char.isspace() else char for char in text)


def has_letter(text: str) -> bool:
    """Whether ``text`` holds something to translate: a letter of any script."""
    return any(char.isalpha() for char in text)


# A sentence that starts with a digit after one that ends in a word: sentencex's German and Czech
# rules never cut before a digit (they keep "am 3. Mai" together), which cost 5 of the boundaries
# in test2016's paragraphs (docs/results.md). Cut there when the word is of five letters or more
# and ends in a small letter, so that short abbreviations ("Abb. 3", "Nr. 5", "ca. 20") stay; a
# long one ("Hauptstr. 5") is cut.
_DIGIT_START = re.compile(r"(?<![^\W\d_])[^\W\d_]{4,}[^\W\d_]\.\s+(?=\d)")


# A sentence without a final stop, followed by another: in German and French an article or a
# number is written with a capital only where a sentence begins (or a title or name begins: "liest
# Die Zeit" is cut, a cost of a few words' context; a missed boundary can cost a sentence, which a
# model that saw one sentence at a time may leave out). 14 of German's 15 unmarked boundaries in
# test2016's paragraphs, 39 of French's 43 (docs/results.md). French "Le", "La" and "Les" are left
# out for its place names (La Rochelle, Le Havre); English for "Plan A", "The Hague"; Czech has no
# articles, and its capitalised nouns mid-sentence are names.
_UNMARKED_STARTS = {
    "de": "Der Die Das Ein Eine Zwei Drei Vier Fünf Sechs Sieben Acht Neun Zehn Mehrere Einige",
    "fr": "Un Une Des Deux Trois Quatre Cinq Six Sept Huit Neuf Dix Plusieurs",
}
_UNMARKED_START = {
    language: re.compile(rf"(?<=[^\W_])\s+(?=(?:{'|'.join(words.split())})\s+[^\W\d_])")
    for language, words in _UNMARKED_STARTS.items()
}


def _cuts(piece: str, language: str) -> list[str]:
    """``piece`` cut after each word-final period that a digit-initial sentence follows, and (in
    German and French) before each sentence-initial article or number that no stop precedes."""
    cuts = [
        m.end() for m in _DIGIT_START.finditer(piece) if piece[m.start() : m.end()].rstrip()[-2].islower()
    ]
    if language in _UNMARKED_START:
        cuts += [m.end() for m in _UNMARKED_START[language].finditer(piece)]
    cuts.sort()
    return [piece[a:b] for a, b in zip([0, *cuts], [*cuts, len(piece)])]


def sentence_spans(text: str, language: str, segment: Segmenter) -> list[Span]:
    """The sentences of ``text`` in ``language`` (an ISO 639-1 code, the model's source), in order:
    each sentencex piece (cut again where ``_cuts`` finds a boundary sentencex does not) without its
    surrounding whitespace, pieces without a letter left out."""
    spans: list[Span] = []
    start = 0
    for piece in (part for whole in segment(language, text) for part in _cuts(whole, language)):
        end = start + len(piece)
        inner = text[start:end].strip()
        if inner and has_letter(inner):
            first = start + len(piece) - len(piece.lstrip())
            spans.append((first, first + len(inner)))
        start = end
    if start != len(text):  # sentencex's promise, which the spans rely on: its pieces join back to the text
        raise RuntimeError(f"sentencex's pieces of a text of {len(text)} characters have {start}")
    return spans
