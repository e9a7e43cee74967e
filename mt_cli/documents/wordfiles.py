"""Word documents (.docx, ``--format docx``): every paragraph's text translated sentence by
sentence, its runs, their formatting and everything else in the file kept. Through python-docx
(the ``documents`` extra), which opens and saves the package; the text is read and written in
its XML.

Paragraphs are those of the body (tables and text boxes included), the headers, the footers and
the foot- and endnotes. A paragraph's text is the text of its runs (``<w:t>``), with a tab or a
line break as one whitespace character that no sentence starts with; it is split into sentences
(``sentences``). A sentence's translation is written into the run its first character is in,
and the other characters of the sentence are taken out of their runs: every run stays (a run may
end up empty), with its formatting, so the translation takes the formatting of the run where its
sentence began. Text between sentences, tabs, breaks, fields, images and properties are kept.
"""

from __future__ import annotations

import bisect
import io
import zipfile
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mt_cli.disk.files import ZIP_EPOCH
from mt_cli.documents.sentences import Segmenter, Span, has_letter, sentence_spans
from mt_cli.errors import InputError

if TYPE_CHECKING:
    from docx.document import Document as DocxDocument

MAX_UNPACKED = 256 << 20  # bytes a .docx may unpack to: a small zip can hold gigabytes of zeros
_XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_PARAGRAPH, _RUN, _TEXT = f"{_W}p", f"{_W}r", f"{_W}t"
_WHITESPACE = {f"{_W}tab": "\t", f"{_W}br": "\n", f"{_W}cr": "\n"}  # written by a run outside <w:t>
_PARTS = ("header", "footer", "footnotes", "endnotes")  # relationship types' last words, with the body's


class WordDocument:
    """A .docx file's sentences (``units``) and the file rebuilt around their translations."""

    def __init__(self, data: bytes, language: str, segment: Segmenter) -> None:
        self._data = data
        self._spans: list[list[Span]] = []
        units: list[str] = []
        for paragraph in _paragraphs(open_docx(data)):
            text = "".join(piece for _, piece in _pieces(paragraph))
            spans = sentence_spans(text, language, segment) if has_letter(text) else []
            self._spans.append(spans)
            units += [" ".join(text[start:end].split()) for start, end in spans]
        self.units = tuple(units)

    def rebuild(self, translations: Sequence[str]) -> bytes:
        """The file with the n-th sentence replaced by the n-th translation."""
        if len(translations) != len(self.units):
            raise ValueError(
                f"{len(translations)} translations for a document of {len(self.units)} sentences"
            )
        document = open_docx(self._data)
        done = 0
        for paragraph, spans in zip(_paragraphs(document), self._spans, strict=True):
            if spans:
                _put(list(_pieces(paragraph)), spans, translations[done : done + len(spans)])
                done += len(spans)
        written = io.BytesIO()
        document.save(written)
        return _dated_as(written.getvalue(), self._data)


def open_docx(data: bytes) -> DocxDocument:
    """The Word document in ``data``, or an InputError saying why it is not one."""
    try:
        import docx
        from docx.opc.exceptions import OpcError
    except ImportError:
        raise InputError('.docx files need the python-docx package: pip install -e ".[documents]"') from None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(member.file_size for member in archive.infolist())
        if unpacked > MAX_UNPACKED:
            raise InputError(
                f"not a .docx file mt reads: it unpacks to {unpacked} bytes, over {MAX_UNPACKED}"
            )
        return docx.Document(io.BytesIO(data))
    # What python-docx and zipfile raise for a file that is not a Word package: a broken zip, a
    # missing part (KeyError), another kind of package (ValueError), broken XML (SyntaxError).
    except (zipfile.BadZipFile, OpcError, KeyError, ValueError, SyntaxError, EOFError) as err:
        reason = " ".join(str(err).split())[:120] or type(err).__name__
        raise InputError(f"not a valid .docx file: {reason}") from None


def _dated_as(written: bytes, source: bytes) -> bytes:
    """``written`` with each member dated as in ``source`` (new ones 1980-01-01): python-docx
    stamps every member with the clock, so the same file translated twice differed by bytes."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(source)) as original,
        zipfile.ZipFile(io.BytesIO(written)) as saved,
        zipfile.ZipFile(out, "w") as rewritten,
    ):
        dates = {member.filename: member.date_time for member in original.infolist()}
        for member in saved.infolist():
            dated = zipfile.ZipInfo(member.filename, dates.get(member.filename, ZIP_EPOCH))
            dated.compress_type = member.compress_type
            dated.external_attr = member.external_attr
            rewritten.writestr(dated, saved.read(member))
    return out.getvalue()


def _paragraphs(document: DocxDocument) -> Iterator[Any]:
    """Every paragraph element of the body, then of the headers, footers, foot- and endnotes,
    in document order (each part once)."""
    from docx.opc.part import XmlPart

    parts: list[Any] = [document.part]
    for relationship in document.part.rels.values():
        if relationship.is_external or relationship.reltype.rsplit("/", 1)[-1] not in _PARTS:
            continue
        part = relationship.target_part
        if isinstance(part, XmlPart) and all(part is not seen for seen in parts):
            parts.append(part)
    for part in parts:
        yield from part.element.iter(_PARAGRAPH)


def _pieces(paragraph: Any) -> Iterator[tuple[Any, str]]:
    """(its <w:t> element, or None for a tab or break, and the text it adds) for each run of
    ``paragraph`` itself, not of a paragraph nested in it (a text box's)."""
    for run in paragraph.iter(_RUN):
        if next(run.iterancestors(_PARAGRAPH)) is not paragraph:
            continue
        for child in run:
            if child.tag == _TEXT:
                yield child, child.text or ""
            elif child.tag in _WHITESPACE:
                yield None, _WHITESPACE[child.tag]


def _put(pieces: list[tuple[Any, str]], spans: list[Span], translations: Sequence[str]) -> None:
    """Each translation written in place of its sentence's first character, the sentence's
    other characters taken out of their runs."""
    starts = [start for start, _ in spans]
    offset = 0
    for element, text in pieces:
        if element is not None:
            kept: list[str] = []
            for position, char in enumerate(text, start=offset):
                number = bisect.bisect_right(starts, position) - 1
                if number < 0 or position >= spans[number][1]:  # between sentences
                    kept.append(char)
                elif position == starts[number]:
                    kept.append(translations[number])
            written = "".join(kept)
            if written != text:
                element.text = written
                element.set(_XML_SPACE, "preserve")  # Word drops a <w:t>'s edge spaces without it
        offset += len(text)
