"""HTML (``--format html``, serve's ``format: "html"``): a page or a fragment, its text translated
sentence by sentence and every other character kept as written.

``markup`` cuts the source into tokens. The tokens between two block edges (a ``<p>``, a
``</li>``, a ``<br>``: any tag but the text-level ones) make one run of text: the text of its
translatable tokens, joined across inline tags, is split into sentences (``sentences``), so a
sentence may hold ``<b>``, ``<a href>``, a comment or a ``<code>`` element. Each sentence is one
unit for the engine, its whitespace collapsed as a browser shows it; markup inside it is put into
its translation by ``inline``'s rule. Everything else (markup at block and sentence edges, the
whitespace between sentences, text that is not translated, a run without a letter) is kept byte
for byte, entities included; translated text is written with ``&``, ``<`` and ``>`` escaped. Every
step is linear, or a binary search per token: a page of a mebibyte with 100,000 inline tags in
one sentence is read and rebuilt in seconds.
"""

from __future__ import annotations

import bisect
import html
from collections.abc import Sequence
from dataclasses import dataclass, replace

from mt_cli.documents.document import Document, Sentence
from mt_cli.documents.inline import Atom, glue
from mt_cli.documents.markup import Kind, Token, tokenize
from mt_cli.documents.sentences import Segmenter, Span, sentence_spans


def read_html(source: str, language: str, segment: Segmenter) -> Document:
    """``source`` (a page or a fragment) as a document of sentences in ``language``."""
    tokens = tokenize(source)
    parts: list[str | Sentence] = []
    run: list[int] = []  # indices of the tokens since the last block edge
    for index, token in enumerate(tokens):
        if token.breaks:
            parts += _Run(tokens, run).parts(language, segment)
            parts.append(token.raw)
            run = []
        else:
            run.append(index)
    parts += _Run(tokens, run).parts(language, segment)
    return Document(tuple(_joined(parts)), html=True)


def _joined(parts: list[str | Sentence]) -> list[str | Sentence]:
    """``parts`` with neighbouring strings made one and empty ones left out."""
    joined: list[str | Sentence] = []
    for part in parts:
        if isinstance(part, str) and joined and isinstance(joined[-1], str):
            joined[-1] += part
        elif part != "":
            joined.append(part)
    return joined


@dataclass(frozen=True)
class _Placed:
    index: int  # the token's index in the page
    start: int  # characters of the run's text before it
    end: int  # start + the characters it adds to the run's text (0 unless translated text)


class _Run:
    """The tokens between two block edges, each placed in the text they make together."""

    def __init__(self, tokens: Sequence[Token], indices: Sequence[int]) -> None:
        self.tokens = tokens
        self.placed: list[_Placed] = []
        texts: list[str] = []
        offset = 0
        for index in indices:
            token = tokens[index]
            width = len(token.text) if _is_text(token) else 0
            self.placed.append(_Placed(index, offset, offset + width))
            texts.append(token.text if width else "")
            offset += width
        self.text = "".join(texts)

    def parts(self, language: str, segment: Segmenter) -> list[str | Sentence]:
        spans = sentence_spans(self.text, language, segment) if self.text else []
        if not spans:
            return ["".join(self.tokens[p.index].raw for p in self.placed)]
        sentences = self._sentences(spans)
        starts = [start for start, _ in spans]
        parts: list[str | Sentence] = []
        for placed in self.placed:
            token = self.tokens[placed.index]
            if placed.start == placed.end:  # markup, or text kept: inside a sentence it is an atom
                if _nothing(token) and not _touching(spans, starts, placed.start):
                    parts.append(token.raw)
                elif not _nothing(token) and _inside(spans, starts, placed.start) is None:
                    parts.append(token.raw)
                continue
            position = placed.start
            while position < placed.end:
                number = bisect.bisect_right(starts, position) - 1
                if number >= 0 and position < spans[number][1]:  # in sentence ``number``
                    if position == spans[number][0]:
                        parts.append(sentences[number])
                    position = min(placed.end, spans[number][1])
                else:
                    following = starts[number + 1] if number + 1 < len(starts) else placed.end
                    end = min(placed.end, following)
                    parts.append(_source(token, position - placed.start, end - placed.start))
                    position = end
        return parts

    def _sentences(self, spans: list[Span]) -> list[Sentence]:
        """A ``Sentence`` per span, with the markup inside it as atoms: the tokens at one place
        (no text between them) make one atom, and an end tag whose start tag is an earlier atom
        of the sentence must come after it."""
        starts = [start for start, _ in spans]
        atoms: list[list[Atom]] = [[] for _ in spans]
        raws: list[list[list[str]]] = [[] for _ in spans]  # each atom's tokens' source texts
        where: dict[int, tuple[int, int]] = {}  # a START token's index -> (its sentence, its atom)
        for placed in self.placed:
            token = self.tokens[placed.index]
            number = _inside(spans, starts, placed.start) if placed.start == placed.end else None
            if number is None or _nothing(token):
                continue
            found, offset = atoms[number], placed.start - spans[number][0]
            if not found or found[-1].offset != offset:
                around = self.text[placed.start - 1], self.text[placed.start]
                found.append(Atom(offset, "", glue(*around, closing=token.kind is Kind.END)))
                raws[number].append([])
            raws[number][-1].append(token.raw)
            if token.kind is Kind.END and token.partner in where:
                sentence, opened = where[token.partner]
                if sentence == number and opened != len(found) - 1:
                    after = found[-1].after
                    found[-1] = replace(found[-1], after=opened if after is None else max(after, opened))
            if token.kind is Kind.START:
                where[placed.index] = (number, len(found) - 1)
        return [
            Sentence(
                " ".join(self.text[start:end].split()),
                end - start,
                tuple(replace(atom, raw="".join(raw)) for atom, raw in zip(atoms[number], raws[number])),
            )
            for number, (start, end) in enumerate(spans)
        ]


def _is_text(token: Token) -> bool:
    return token.kind is Kind.TEXT and token.translatable and token.text != ""


def _nothing(token: Token) -> bool:
    """Whether ``token`` is a reference to a character that is no text (``&#xE``, a control):
    text that a sentence it touches replaces, never an atom or kept beside one, where it would
    read the translation's first letters as its own digits (``&#xE`` + ``Ein`` is ``&#xEE``...)."""
    return token.kind is Kind.TEXT and token.translatable and token.text == ""


def _touching(spans: list[Span], starts: list[int], offset: int) -> bool:
    """Whether ``offset`` (a place between two characters) is inside a sentence or at its edge."""
    number = bisect.bisect_right(starts, offset) - 1
    return number >= 0 and offset <= spans[number][1]


def _inside(spans: list[Span], starts: list[int], offset: int) -> int | None:
    """The sentence that ``offset`` (a place between two characters) is strictly inside, if any."""
    number = bisect.bisect_left(starts, offset) - 1
    if number >= 0 and offset < spans[number][1]:
        return number
    return None


def _source(token: Token, start: int, end: int) -> str:
    """The source text of characters [start, end) of a text token: its own, where it can be cut."""
    if (start, end) == (0, len(token.text)):
        return token.raw
    if token.raw == token.text:
        return token.raw[start:end]
    return html.escape(token.text[start:end], quote=False)
