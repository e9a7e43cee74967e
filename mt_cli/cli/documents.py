"""``mt translate``'s input: lines, read in chunks, and ``--format``: lines (the default), plain
text whose lines are split into sentences, or one HTML page or fragment (the ``documents`` wing
splits and puts back; the model's API, ``Model.translate_document``, translates)."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from mt_cli.cli.common import option, standard_stream
from mt_cli.documents.formats import DocumentFormat
from mt_cli.documents.sentences import segmenter
from mt_cli.errors import InputError

if TYPE_CHECKING:
    from mt_cli.api import Model
    from mt_cli.config.options import TranslateOptions


class InputFormat(str, enum.Enum):
    """``--format``: what the input is."""

    LINES = "lines"  # a sentence a line, each translated as it is
    TEXT = "text"  # paragraphs: each line split into sentences
    HTML = "html"  # one HTML page or fragment

    @property
    def document(self) -> DocumentFormat | None:
        """The documents format it reads as (None: lines, which are no document)."""
        return None if self is InputFormat.LINES else DocumentFormat(self.value)


FormatOption = option(
    InputFormat,
    "--format",
    "-f",
    help="lines: a sentence a line (the default; --n-best, --align, --json need it); text: "
    "paragraphs, each line split into sentences, its whitespace kept; html: the whole input is one "
    "HTML page or fragment, its text translated and its markup kept.",
)


def check_document_options(
    form: InputFormat, n_best: int, align: bool, as_json: bool, attention: bool
) -> None:
    """An InputError for an option that prints per line, with a format that prints a document, or
    for a document format without its sentence splitter installed: before the model loads."""
    if form is InputFormat.LINES:
        return
    given = {"--n-best": n_best > 1, "--align": align, "--json": as_json, "--attention": attention}
    for name, used in given.items():
        if used:
            raise InputError(f"{name} needs --format lines: --format {form.value} writes translated text")
    segmenter()


def input_chunks(
    text: str | None, input_file: Path | None, buffer_size: int
) -> tuple[Iterator[list[str]], int | None]:
    """(chunks of input lines, the number of lines if known) from the argument, a file or stdin."""
    from mt_cli.disk.reading import batched, count_lines, stream_file_lines, stream_lines, text_lines

    if text is not None:
        return iter([text_lines(text) or [""]]), None
    if input_file is not None:
        return batched(stream_file_lines(input_file), buffer_size), count_lines(input_file)
    stdin = standard_stream("stdin")
    size = 1 if stdin.isatty() else buffer_size
    return batched(stream_lines(stdin.buffer, "standard input"), size), None


def translated_documents(
    model: Model,
    options: TranslateOptions,
    form: DocumentFormat,
    chunks: Iterator[list[str]],
    text: str | None,
    input_file: Path | None,
) -> Iterator[tuple[str, int]]:
    """(translated output, input lines it covers) as it is done: plain text a chunk of lines at a
    time (each chunk's sentences in one batch), HTML the whole input at once."""
    if form is DocumentFormat.HTML:
        yield model.translate_document(_whole_input(text, input_file), form, options), 1
        return
    for chunk in chunks:
        yield model.translate_document("\n".join(chunk), form, options) + "\n", len(chunk)


def _whole_input(text: str | None, input_file: Path | None) -> str:
    """The argument, the file or stdin as one text, exactly (a BOM dropped)."""
    from mt_cli.disk.reading import open_bytes

    if text is not None:
        return text
    if input_file is not None:
        with open_bytes(input_file) as handle:
            raw, name = handle.read(), str(input_file)
    else:
        raw, name = standard_stream("stdin").buffer.read(), "standard input"
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise InputError(f"{name} is not UTF-8 (line {line}); convert it, e.g. with iconv -t UTF-8") from None
