"""SubRip subtitles (.srt, ``--format srt``): each cue's text translated, its number and timing
line kept byte for byte.

A file is a sequence of cues separated by blank lines; a cue is a number line, a timing line
(``00:00:01,000 --> 00:00:02,500``, a period for the comma taken too, anything after the end
time, such as a position, kept) and its text lines. The parser is strict and mt's own: the
``srt`` library (PyPI) was not used because it writes a file back from parsed values
(``srt.compose`` renumbers the cues, rewrites every timestamp in its own format and strips the
text), so a cue's lines would not come back as they were written. Anything that is not a cue
(a text line before any number, a number without a timing line) is an ``InputError`` naming its
line.

A cue's text lines make one run of text, split into sentences (``sentences``): a sentence may
run over the cue's line break, and its translation is written on one line; a line starting with
a dash (dialogue: another speaker) starts a new sentence, the dash kept as written. The
whitespace and line breaks between sentences are kept. A subtitle's markup (``<i>``,
``{\\an8}``) is text here.
"""

from __future__ import annotations

import re

from mt_cli.documents.document import Document, Sentence
from mt_cli.documents.sentences import Segmenter, sentence_spans
from mt_cli.errors import InputError

_NUMBER = re.compile(r"\ufeff?\s*[0-9]+\s*")  # a BOM before the first, kept
_TIME = r"[0-9]{1,3}:[0-9]{2}:[0-9]{2}[,.][0-9]{1,3}"
_SPEAKER = re.compile(r"\n(?=[^\S\n]*[-\u2010-\u2015])")  # a line break before a line starting with a dash
_DASH = re.compile(r"[-\u2010-\u2015][^\S\n]*")
_TIMING = re.compile(rf"\s*{_TIME}\s*-->\s*{_TIME}(?:\s.*)?")


def read_srt(text: str, language: str, segment: Segmenter) -> Document:
    """``text`` (a whole .srt file) as a document whose sentences are its cues' text in
    ``language``; an InputError naming the first line that is not where a cue has it."""
    lines = text.split("\n")  # each with its CR, if any: kept as written
    parts: list[str | Sentence] = []
    kept: list[str] = []  # the lines (and their "\n") since the last sentence's text
    number = 0
    while number < len(lines):
        if lines[number].strip() == "":  # blank lines between cues
            kept.append(lines[number])
            number += 1
            continue
        if not _NUMBER.fullmatch(lines[number]):
            raise _not_srt(number, "a cue number", lines[number])
        if number + 1 >= len(lines) or not _TIMING.fullmatch(lines[number + 1]):
            following = lines[number + 1] if number + 1 < len(lines) else ""
            raise _not_srt(number + 1, "a timing line (00:00:01,000 --> 00:00:02,000)", following)
        kept += lines[number : number + 2]
        end = number + 2
        while end < len(lines) and lines[end].strip() != "":
            end += 1
        if end > number + 2:  # the cue has text: one run from its first line to its last
            kept.append("")  # the "\n" before the text
            parts.append("\n".join(kept))
            parts += _cue_parts("\n".join(lines[number + 2 : end]), language, segment)
            kept = [""]  # the "\n" after the text, if another line follows
        number = end
    parts.append("\n".join(kept))
    return Document(tuple(part for part in parts if part != ""))


def _cue_parts(text: str, language: str, segment: Segmenter) -> list[str | Sentence]:
    """A cue's text as its sentences and the text between them, kept as written; a line that
    starts with a dash (a second speaker's) starts a run of its own."""
    parts: list[str | Sentence] = []
    done = 0
    starts = [0, *(match.start() + 1 for match in _SPEAKER.finditer(text)), len(text)]
    for first, last in zip(starts, starts[1:]):
        for start, end in sentence_spans(text[first:last], language, segment):
            start, end = first + start, first + end
            if dash := _DASH.match(text, start, end):  # the speaker's dash is kept, not translated
                start = dash.end()
            parts += [text[done:start], Sentence(" ".join(text[start:end].split()), end - start)]
            done = end
    parts.append(text[done:])
    return parts


def _not_srt(index: int, expected: str, line: str) -> InputError:
    shown = line.strip()
    shown = shown if len(shown) <= 40 else shown[:40] + "..."
    return InputError(f"not a SubRip (.srt) file: line {index + 1} should be {expected}, not {shown!r}")
