"""Inline markup inside a sentence, put into its translation.

The model translates a sentence's text alone; markup inside it (a ``<b>`` around some words, a
link, a comment, a ``<code>`` or ``translate="no"`` element, which the model does not see) has
to be put back. The rule, which needs nothing from the engine:

* Markup at a sentence's edges, and between sentences, never moves (``pages`` keeps it where it
  was); ``<p><b>Ein Satz.</b> <i>Noch einer.</i></p>`` keeps every tag exactly.
* Markup inside a sentence keeps its order and nesting and goes to the word boundary of the
  translation nearest to the same relative place (by characters) as in the source. Markup glued
  to the word after it (an opening ``<b>``) goes before a word, markup glued to the word before
  it (a closing ``</b>``, also before punctuation: ``</a>.``) after one, markup with space on
  both sides between two words, with a space. An element that held text holds at least one
  word of the translation.

So ``Ein <b>großer</b> Hund läuft.`` becomes ``A <b>big</b> dog is running.``; where word order
differs the markup lands on the words at the same place, not necessarily the words it meant.
"""

from __future__ import annotations

import bisect
import enum
import html
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass


class Glue(enum.Enum):
    NEXT = "next"  # no space after it in the source: it belongs before a word
    PREVIOUS = "previous"  # space after it, none before: it belongs after a word
    FREE = "free"  # space on both sides: it goes between two words


@dataclass(frozen=True)
class Atom:
    """Markup at one place inside a sentence: one or more tokens with no text between them."""

    offset: int  # characters of the sentence's source before it (0 < offset < the sentence's length)
    raw: str  # its source text, kept as written
    glue: Glue
    after: int | None = None  # an earlier atom of the sentence that opened an element this one closes


def glue(before: str, after: str, closing: bool) -> Glue:
    """How markup sits between the characters ``before`` and ``after`` it: an end tag (``closing``)
    belongs to the word it follows unless space is before it, other markup to the word after it
    unless space is after it; with space on both sides it stands between words."""
    if closing and not before.isspace():
        return Glue.PREVIOUS
    if not after.isspace():
        return Glue.NEXT
    return Glue.FREE if before.isspace() else Glue.PREVIOUS


def place(translation: str, length: int, atoms: Sequence[Atom]) -> str:
    """``translation`` as HTML text (``&``, ``<``, ``>`` escaped) with ``atoms`` put in (see the
    module docstring); ``length``: characters of the source sentence the atoms' offsets count."""
    size = len(translation)
    word_starts, word_ends = _word_edges(translation)
    edges = {Glue.NEXT: word_starts, Glue.PREVIOUS: word_ends, Glue.FREE: [*word_starts, size]}
    positions: list[int] = []
    for atom in atoms:
        lowest = positions[-1] if positions else 0
        above = positions[atom.after] if atom.after is not None else -1  # an element's close: past its open
        positions.append(
            _nearest(edges[atom.glue], max(lowest, above + 1), atom.offset / length * size, size)
        )
    pieces, done = [], 0
    for atom, position in zip(atoms, positions):
        pieces.append(html.escape(translation[done:position], quote=False))
        if atom.glue is Glue.FREE and position == size and size and not translation[-1].isspace():
            pieces.append(" " + atom.raw)
        elif atom.glue is Glue.FREE and position < size:
            pieces.append(atom.raw + " ")
        else:
            pieces.append(atom.raw)
        done = position
    pieces.append(html.escape(translation[done:], quote=False))
    return "".join(pieces)


def _nearest(edges: list[int], lowest: int, ideal: float, otherwise: int) -> int:
    """The edge (of the ascending ``edges``) not below ``lowest`` nearest to ``ideal``, the lower
    one of two as near; ``otherwise`` if none. A binary search: a sentence with thousands of
    atoms (a hostile page's) costs thousands of logarithms, not their product with its words."""
    first = bisect.bisect_left(edges, lowest)
    if first == len(edges):
        return otherwise
    above = max(first, bisect.bisect_left(edges, ideal, first))
    if above == len(edges) or above > first and ideal - edges[above - 1] <= edges[above] - ideal:
        return edges[above - 1]
    return edges[above]


def _word_edges(text: str) -> tuple[list[int], list[int]]:
    """Where the words of ``text`` (runs of non-space) start and end, and also where their letters
    start and end inside punctuation around them (so that a link can end before a word's period)."""
    starts, ends = [], []
    for match in re.finditer(r"\S+", text):
        start, end = match.span()
        first, last = start, end
        while first < last and _punctuation(text[first]):
            first += 1
        while last > first and _punctuation(text[last - 1]):
            last -= 1
        if first == last:  # punctuation alone is a word of its own
            first, last = start, end
        starts += sorted({start, first})
        ends += sorted({last, end})
    return starts, ends


def _punctuation(char: str) -> bool:
    return unicodedata.category(char).startswith("P")
