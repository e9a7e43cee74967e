"""Whole files, by kind: which format a file name's extension means, and a file's bytes read
into sentences to translate and written back around their translations.

.txt is plain text (``plain``), .html and .htm HTML (``pages``), .srt SubRip subtitles
(``subtitles``), all three UTF-8 (a byte-order mark kept); the rest are zip packages
(``packages``): .docx a Word document (``wordfiles``), .pptx a PowerPoint presentation
(``slides``), .odt and .odp OpenDocument text and presentations (``opendocument``), .epub an
e-book (``ebooks``). ``/translate_file`` and ``mt translate -i FILE`` (through
``Model.translate_file``) read files here; a file that is not what its format says (UTF-16 text
among them, a hostile package) is an ``InputError`` in one line.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Protocol

from mt_cli.disk.reading import utf8_text
from mt_cli.documents import ebooks, opendocument, slides, wordfiles
from mt_cli.documents.document import Document
from mt_cli.documents.formats import DocumentFormat, read_documents
from mt_cli.documents.packages import Layout, PackageDocument
from mt_cli.documents.sentences import segmenter
from mt_cli.errors import InputError

BOM = "\ufeff"


class FileFormat(str, enum.Enum):
    """What a file is; each value is also the name of its ``--format``."""

    TEXT = "text"
    HTML = "html"
    SRT = "srt"
    DOCX = "docx"
    PPTX = "pptx"
    ODT = "odt"
    ODP = "odp"
    EPUB = "epub"

    @property
    def binary(self) -> bool:
        """Whether its files are bytes, not UTF-8 text (they cannot be written to a terminal)."""
        return self in _PACKAGES


EXTENSIONS = {
    ".txt": FileFormat.TEXT,
    ".html": FileFormat.HTML,
    ".htm": FileFormat.HTML,
    ".srt": FileFormat.SRT,
    ".docx": FileFormat.DOCX,
    ".pptx": FileFormat.PPTX,
    ".odt": FileFormat.ODT,
    ".odp": FileFormat.ODP,
    ".epub": FileFormat.EPUB,
}
_PACKAGES: dict[FileFormat, Layout] = {
    FileFormat.DOCX: wordfiles.LAYOUT,
    FileFormat.PPTX: slides.LAYOUT,
    FileFormat.ODT: opendocument.TEXT,
    FileFormat.ODP: opendocument.PRESENTATION,
    FileFormat.EPUB: ebooks.LAYOUT,
}


def format_of(name: str) -> FileFormat | None:
    """The format a file name's extension (any case) says, or None for another extension."""
    return EXTENSIONS.get(PurePath(name).suffix.lower())


class FileDocument(Protocol):
    """A file read for translation: its sentences, in order, and the file rebuilt from them."""

    @property
    def units(self) -> tuple[str, ...]: ...

    def rebuild(self, translations: Sequence[str]) -> bytes: ...


@dataclass(frozen=True)
class TextFile:
    """A UTF-8 file read as one document, written back as UTF-8 (with its BOM, if it had one)."""

    document: Document
    bom: bool

    @property
    def units(self) -> tuple[str, ...]:
        return self.document.units

    def rebuild(self, translations: Sequence[str]) -> bytes:
        return ((BOM if self.bom else "") + self.document.rebuild(translations)).encode("utf-8")


def read_file(data: bytes, form: FileFormat, language: str, name: str = "the file") -> FileDocument:
    """``data`` (a whole file named ``name``, as messages call it) read as ``form``, its
    sentences split by the rules of ``language``."""
    if form in _PACKAGES:
        return PackageDocument(data, _PACKAGES[form], language, segmenter())
    text = utf8_text(data, name, InputError)
    document = read_documents([text.removeprefix(BOM)], DocumentFormat(form.value), language)[0]
    return TextFile(document, text.startswith(BOM))
