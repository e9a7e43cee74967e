"""Plain text (``--format text``, serve's ``format: "text"``): paragraphs split into sentences.

Each line (split on "\\n" alone, as mt reads every file) is a paragraph, split into sentences on
its own: a sentence never crosses a line break, so the translation has the text's lines, one for
one, and a line that is one sentence is one unit, as in line-by-line translation. Everything that
is not a sentence (the whitespace around and between sentences, a CR before a line's "\\n", a line
without a letter) is kept as written.
"""

from __future__ import annotations

from mt_cli.documents.document import Document, Sentence
from mt_cli.documents.sentences import Segmenter, sentence_spans


def read_text(text: str, language: str, segment: Segmenter) -> Document:
    """``text`` as a document of sentences in ``language``, split line by line."""
    parts: list[str | Sentence] = []
    start, done = 0, 0
    for line in text.split("\n"):
        for first, end in sentence_spans(line, language, segment):
            parts += [text[done : start + first], Sentence(line[first:end], end - first)]
            done = start + end
        start += len(line) + 1
    parts.append(text[done:])
    return Document(tuple(part for part in parts if part != ""))
