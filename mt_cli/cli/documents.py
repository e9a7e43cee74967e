"""``mt translate``'s input: lines, read in chunks, and ``--format``: lines, plain text whose
lines are split into sentences, or a whole file (HTML, SubRip subtitles, a Word, PowerPoint or
OpenDocument file, an EPUB book), the format picked by ``-i``'s extension when ``--format`` is not
given (the ``documents`` wing splits and puts back; the model's API, ``Model.translate_document``
and ``translate_file``, translates)."""

from __future__ import annotations

import enum
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from mt_cli.cli.common import option, standard_stream, write_stdout
from mt_cli.documents.filetypes import FileFormat, format_of
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
    SRT = "srt"  # SubRip subtitles
    DOCX = "docx"  # a Word document (bytes: -i and -o, as the four below)
    PPTX = "pptx"  # a PowerPoint presentation
    ODT = "odt"  # an OpenDocument text
    ODP = "odp"  # an OpenDocument presentation
    EPUB = "epub"  # an EPUB e-book

    @property
    def document(self) -> DocumentFormat | None:
        """The text format it is read as a chunk of lines at a time (None: lines, or a whole file)."""
        return DocumentFormat.TEXT if self is InputFormat.TEXT else None

    @property
    def file(self) -> FileFormat | None:
        """The file format of an input read and translated whole (None: read in chunks of lines)."""
        return None if self in (InputFormat.LINES, InputFormat.TEXT) else FileFormat(self.value)


FormatOption = option(
    InputFormat | None,
    "--format",
    "-f",
    help="lines: a sentence a line (--n-best, --align, --json need it); text: paragraphs, each line "
    "split into sentences, its whitespace kept; html: one HTML page or fragment, its markup kept; "
    "srt: SubRip subtitles, numbers and timings kept; docx, pptx, odt, odp, epub: a Word document, "
    "a PowerPoint presentation, an OpenDocument text or presentation, an EPUB book, the formatting "
    "of their runs kept (need -i and -o). Default: by -i's extension (.txt text, .html/.htm html, "
    ".srt srt, .docx, .pptx, .odt, .odp, .epub theirs), else lines.",
)


def input_format(
    given: InputFormat | None, input_file: Path | None, output_file: Path | None, per_line: dict[str, bool]
) -> InputFormat:
    """The format to read: ``given``, else ``-i``'s extension's, else lines (and lines too for a
    .txt file with an option that prints per line, as such files were read before formats). An
    InputError for an option that prints per line with a format that prints a document, for a
    binary format (docx, ...) without -i and -o, or for a document format without its sentence
    splitter installed: before the model loads. ``per_line``: each such option and whether it was
    given."""
    form = given
    if form is None and input_file is not None and (found := format_of(input_file.name)) is not None:
        form = InputFormat(found.value)
        if form is InputFormat.TEXT and any(per_line.values()):
            form = InputFormat.LINES
    form = form or InputFormat.LINES
    if form is InputFormat.LINES:
        return form
    for name, used in per_line.items():
        if used:
            raise InputError(f"{name} needs --format lines: --format {form.value} writes translated text")
    if form.file is not None and form.file.binary and (input_file is None or output_file is None):
        name = form.value
        raise InputError(f"--format {name} reads and writes files: give -i FILE.{name} and -o OUT.{name}")
    segmenter()
    return form


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
    model: Model, options: TranslateOptions, form: DocumentFormat, chunks: Iterator[list[str]]
) -> Iterator[tuple[str, int]]:
    """(translated output, input lines it covers) as it is done, a chunk of lines at a time (each
    chunk's sentences in one batch)."""
    for chunk in chunks:
        yield model.translate_document("\n".join(chunk), form, options) + "\n", len(chunk)


def translate_whole(
    model: Model,
    options: TranslateOptions,
    form: FileFormat,
    text: str | None,
    input_file: Path | None,
    output_file: Path | None,
) -> None:
    """Translate the argument, the file or stdin as one file of ``form`` and write it to
    ``output_file`` (atomically) or stdout, with a progress bar of sentences on a terminal."""
    from tqdm import tqdm

    from mt_cli.disk.files import atomic_write_bytes

    data, name = _whole_input(text, input_file)
    quiet = True if output_file is None and sys.stdout.isatty() else None  # None: a bar on a terminal
    with tqdm(desc="translating", unit="sentence", leave=False, disable=quiet) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        translated = model.translate_file(data, form, options, progress, name=name)
    if output_file is None:
        write_stdout(translated.decode("utf-8"))
        return
    atomic_write_bytes(output_file, lambda handle: handle.write(translated))


def _whole_input(text: str | None, input_file: Path | None) -> tuple[bytes, str]:
    """(the argument, the file or stdin as bytes, exactly, and its name as messages call it)."""
    from mt_cli.disk.reading import open_bytes

    if text is not None:
        return text.encode("utf-8"), "the text"
    if input_file is not None:
        with open_bytes(input_file) as handle:
            return handle.read(), str(input_file)
    return standard_stream("stdin").buffer.read(), "standard input"
