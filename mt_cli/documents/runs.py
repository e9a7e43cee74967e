"""A paragraph whose text is spread over runs (Word's ``<w:r>``, PowerPoint's ``<a:r>``,
OpenDocument's ``<text:span>``, XHTML's inline elements): its sentences found across the runs,
and each sentence's translation written where the sentence began.

Every format of a package (``wordfiles``, ``slides``, ``opendocument``, ``ebooks``) reads a
paragraph as pieces: the text each run (or each text node of mixed XML content) adds, in order,
with a way to write it; a tab, a line break or a run of spaces adds whitespace that is kept
where it is. The pieces' text joined is the paragraph's text, which is split into sentences
(``sentences``). A sentence's translation is written into the piece its first character is in,
and the sentence's other characters are taken out of their pieces: every run stays (a run may
end up empty), with its formatting, so the translation takes the formatting of the run where its
sentence began. Text between sentences is kept as written.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from mt_cli.documents.sentences import Segmenter, Span, has_letter, sentence_spans


@dataclass(frozen=True)
class Piece:
    """The text one run adds to its paragraph, and how to write it (None: whitespace that stays
    as it is: a tab, a break, a run of spaces)."""

    text: str
    write: Callable[[str], None] | None = None


def spans_of(pieces: Sequence[Piece], language: str, segment: Segmenter) -> list[Span]:
    """The sentences of the paragraph ``pieces`` make, as spans of their joined text."""
    text = "".join(piece.text for piece in pieces)
    return sentence_spans(text, language, segment) if has_letter(text) else []


def units_of(pieces: Sequence[Piece], spans: Sequence[Span]) -> list[str]:
    """Each sentence's text, its whitespace (line breaks and tabs among it) one space."""
    text = "".join(piece.text for piece in pieces)
    return [" ".join(text[start:end].split()) for start, end in spans]


def put(pieces: Sequence[Piece], spans: Sequence[Span], translations: Sequence[str]) -> None:
    """Each translation written in place of its sentence's first character, the sentence's
    other characters taken out of their pieces."""
    starts = [start for start, _ in spans]
    offset = 0
    for piece in pieces:
        if piece.write is not None:
            kept: list[str] = []
            for position, char in enumerate(piece.text, start=offset):
                number = bisect.bisect_right(starts, position) - 1
                if number < 0 or position >= spans[number][1]:  # between sentences
                    kept.append(char)
                elif position == starts[number]:
                    kept.append(translations[number])
            written = "".join(kept)
            if written != piece.text:
                piece.write(written)
        offset += len(piece.text)


def text_of(element: Any) -> Piece:
    """The text an XML element starts with, as a piece that writes it."""

    def write(value: str) -> None:
        element.text = value or None

    return Piece(element.text or "", write)


def tail_of(element: Any) -> Piece:
    """The text after an XML element (up to its next sibling), as a piece that writes it."""

    def write(value: str) -> None:
        element.tail = value or None

    return Piece(element.tail or "", write)


def mixed_pieces(
    element: Any, inline: Callable[[Any], bool], spaces: Callable[[Any], str | None]
) -> Iterator[Piece]:
    """The pieces of an element of mixed content: its text, then for each child the whitespace
    ``spaces`` says it stands for, or (``inline``) its own pieces, or nothing (anything else:
    a comment, an image, a note, a field, kept as it is), then the child's tail. A loop over a
    stack, not a recursion: a piece costs the same however deep its spans are nested."""
    stack: list[Any] = [element]  # pieces to yield and elements to read, the next one last
    while stack:
        item = stack.pop()
        if isinstance(item, Piece):
            yield item
            continue
        yield text_of(item)
        for child in reversed(item):
            stack.append(tail_of(child))
            space = spaces(child) if isinstance(child.tag, str) else None
            if space is not None:
                stack.append(Piece(space))
            elif isinstance(child.tag, str) and inline(child):
                stack.append(child)
