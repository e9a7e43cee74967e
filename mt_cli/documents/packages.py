"""Zip packages (.docx, .pptx, .odt, .odp, .epub): a package checked before anything in it is
trusted, its XML parts parsed under limits, and the package written back with some parts
replaced and every other member copied byte for byte.

These files come from anyone (``/translate_file``), so a package is refused, in one line, when it
is a zip bomb (over ``MAX_UNPACKED`` bytes unpacked, ``MAX_MEMBERS`` members, or XML of more than
``MAX_ELEMENTS`` elements or ``MAX_TEXT`` characters: a few kilobytes of zipped empty paragraphs
held gigabytes once parsed, so elements and text are bounded, not only bytes), when a member is
encrypted, compressed by another method than stored or deflated (the only two the four formats'
specs allow), damaged (its deflate data or checksum), or named by a path that could land outside
a folder (absolute, with ``..``) or twice (case aside), and when its XML declares a DTD:
OOXML and ODF allow none, and an EPUB's XHTML may name one (``<!DOCTYPE html>``) but declare
nothing in it. Entities are never expanded, external ones never read, nothing is fetched.

The XML is lxml's (the ``documents`` extra), because it keeps what it does not understand:
namespace prefixes as written (Office files refer to them by name in ``mc:Ignorable``), comments
and processing instructions; ElementTree renames prefixes. python-docx and python-pptx were not
used to write: they re-serialise every part they load and drop the parts no relationship names,
so a translated file would differ from its source beyond its text (the tests build and reopen
files with them). A rewritten package keeps its members' order, dates (a file translated twice
is the same bytes) and compression, with ``mimetype`` first and stored where ODF and EPUB
require it.
"""

from __future__ import annotations

import contextlib
import io
import posixpath
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mt_cli.documents.runs import Piece, put, spans_of, units_of
from mt_cli.documents.sentences import Segmenter, Span
from mt_cli.errors import InputError

MAX_UNPACKED = 256 << 20  # bytes a package may unpack to: a small zip can hold gigabytes of zeros
MAX_MEMBERS = 10_000  # files in a package: a book's chapters and images are hundreds
MAX_ELEMENTS = 1_000_000  # XML elements read from one package (about 200 MB parsed; a long book has 300,000)
MAX_TEXT = 10_000_000  # characters of text in the XML read from one package (a book of 5,000 pages)
_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}
_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an OLE compound file: a password-protected Office file
# What zipfile and zlib raise for a damaged archive or member.
_DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError)


class Package:
    """A zip package checked as a whole: names, sizes, methods, and every member's data."""

    def __init__(self, data: bytes, kind: str, doctypes: bool = False) -> None:
        """``kind`` is the file as messages call it (".docx"); ``doctypes``: a DOCTYPE that
        declares nothing is allowed (XHTML's), else any DOCTYPE is refused."""
        self.kind, self._doctypes = kind, doctypes
        self._elements = self._characters = 0  # XML read so far, against MAX_ELEMENTS and MAX_TEXT
        try:
            import lxml.etree  # noqa: F401
        except ImportError:
            raise InputError(f'{kind} files need the lxml package: pip install -e ".[documents]"') from None
        if data.startswith(_OLE):
            raise self.refused("it is encrypted (or an old binary Office file); save it without a password")
        try:
            self._archive = zipfile.ZipFile(io.BytesIO(data))
            self._infos = self._archive.infolist()
        except _DAMAGED as err:
            raise self.invalid(_reason(err)) from None
        self._check_members()
        self.names = {info.filename: info for info in self._infos}
        for info in self._infos:  # every byte read once: a damaged member is found now
            with self._reading(info.filename), self._archive.open(info) as member:
                while member.read(1 << 20):
                    pass

    def invalid(self, reason: str) -> InputError:
        """The one-line error for a package that is not what its kind says."""
        return InputError(f"not a valid {self.kind} file: {reason}")

    def refused(self, reason: str) -> InputError:
        """The one-line error for a package mt does not read, valid or not."""
        return InputError(f"not a {self.kind} file mt reads: {reason}")

    def _check_members(self) -> None:
        if len(self._infos) > MAX_MEMBERS:
            raise self.refused(f"it holds {len(self._infos)} files, over {MAX_MEMBERS}")
        unpacked = sum(info.file_size for info in self._infos)
        if unpacked > MAX_UNPACKED:
            raise self.refused(f"it unpacks to {unpacked} bytes, over {MAX_UNPACKED}")
        seen: set[str] = set()
        for info in self._infos:
            name = info.filename
            parts = name.replace("\\", "/").split("/")
            if name.startswith(("/", "\\")) or ".." in parts or ":" in parts[0] or "\0" in name:
                raise self.refused(f"it holds a file named {name!r}, outside its own folders")
            if name.casefold() in seen:
                raise self.refused(f"it holds two files named {name!r}")
            seen.add(name.casefold())
            if info.flag_bits & 0x1:
                raise self.refused(f"{name} is encrypted; save it without a password")
            if info.compress_type not in _METHODS:
                method = zipfile.compressor_names.get(info.compress_type, "unknown")
                raise self.refused(
                    f"{name} is compressed by method {info.compress_type} ({method}); "
                    "only stored and deflated files are read"
                )

    @contextlib.contextmanager
    def _reading(self, name: str) -> Iterator[None]:
        """Zip and zlib errors reading member ``name`` as this package's one-line error."""
        try:
            yield
        except _DAMAGED as err:
            raise self.invalid(f"{name} is damaged ({_reason(err)})") from None

    def read(self, name: str) -> bytes:
        """The bytes of member ``name``, or an InputError saying the package lacks it."""
        if name not in self.names:
            raise self.invalid(f"it has no {name}")
        with self._reading(name):
            return self._archive.read(self.names[name])

    def xml(self, name: str) -> Any:
        """Member ``name`` parsed (its root element), its elements and text counted against
        the limits as they are read, a DTD refused before the first element is read."""
        from lxml import etree

        if name not in self.names:
            raise self.invalid(f"it has no {name}")
        try:
            with self._reading(name), self._archive.open(self.names[name]) as member:
                events = etree.iterparse(member, events=("start",), **_SAFE)
                for count, (_, element) in enumerate(events):
                    if count == 0:  # the root: its DOCTYPE, if any, was read before it
                        self._check_doctype(name, element)
                    self._elements += 1
                    if self._elements > MAX_ELEMENTS:
                        raise self.refused(f"its XML holds over {MAX_ELEMENTS} elements")
                root = events.root
        except etree.XMLSyntaxError as err:
            raise self.invalid(f"{name} is not well-formed XML ({_reason(err.msg or err)})") from None
        self._characters += sum(len(text) for text in root.itertext())
        if self._characters > MAX_TEXT:
            raise self.refused(f"its XML holds over {MAX_TEXT} characters of text")
        return root

    def _check_doctype(self, name: str, root: Any) -> None:
        info = root.getroottree().docinfo
        if not info.doctype:
            return
        dtd = info.internalDTD
        declares = dtd is not None and (any(True for _ in dtd.iterentities()) or dtd.elements())
        if declares or not self._doctypes:
            raise self.refused(f"{name} declares a DTD, which mt refuses (entities could read files)")

    def rebuild(self, replaced: Mapping[str, bytes], first: str | None = None) -> bytes:
        """The package with each member named in ``replaced`` holding its new bytes and every
        other copied byte for byte; ``first`` (ODF's and EPUB's ``mimetype``), if there, moved
        first and stored. Dates, order, compression and permissions are the source's."""
        infos = sorted(self._infos, key=lambda info: info.filename != first)  # stable
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as target:
            for info in infos:
                copy = zipfile.ZipInfo(info.filename, info.date_time)
                copy.compress_type = zipfile.ZIP_STORED if info.filename == first else info.compress_type
                copy.external_attr, copy.create_system = info.external_attr, info.create_system
                data = replaced.get(info.filename)
                target.writestr(copy, self.read(info.filename) if data is None else data)
        return out.getvalue()


_SAFE = {"resolve_entities": False, "load_dtd": False, "no_network": True, "huge_tree": False}


def _reason(err: BaseException | str) -> str:
    """An error's words, on one line, cut at 120 characters."""
    return " ".join(str(err).split())[:120] or type(err).__name__


def serialized(root: Any) -> bytes:
    """An XML part's bytes again: its DOCTYPE, comments and processing instructions around the
    root kept, its declaration written as Office writes one (encoding and ``standalone="yes"``
    kept; lxml cannot tell a ``standalone="no"`` from none, and both mean the same)."""
    from lxml import etree

    tree = root.getroottree()
    info = tree.docinfo
    encoding = info.encoding or "UTF-8"
    standalone = ' standalone="yes"' if info.standalone else ""
    declaration = f'<?xml version="{info.xml_version or "1.0"}" encoding="{encoding}"{standalone}?>\n'
    return declaration.encode(encoding) + etree.tostring(tree, encoding=encoding, xml_declaration=False)


def resolve(base: str, reference: str) -> str:
    """A package path for ``reference`` (percent-encoded, relative to the member ``base``, or
    from the root if it starts with /): "word/document.xml" and "media/a.png" ->
    "word/media/a.png"."""
    from urllib.parse import unquote

    path = unquote(reference.split("#", 1)[0])
    joined = path.lstrip("/") if path.startswith("/") else posixpath.join(posixpath.dirname(base), path)
    return posixpath.normpath(joined)


@dataclass(frozen=True)
class Layout:
    """What one format of package is: how messages call it, which XML parts hold its text (in
    reading order) and how a part's root holds its paragraphs."""

    kind: str  # ".docx"
    parts: Callable[[Package], list[str]]
    paragraphs: Callable[[Any], Iterator[list[Piece]]]
    first: str | None = None  # the member that must come first, stored ("mimetype")
    doctypes: bool = False  # XHTML's DOCTYPE (declaring nothing) allowed


class PackageDocument:
    """A package's sentences (``units``) and the package rebuilt around their translations."""

    def __init__(self, data: bytes, layout: Layout, language: str, segment: Segmenter) -> None:
        self._data, self._layout = data, layout
        self._spans: dict[int, list[Span]] = {}  # by paragraph number, those with a sentence
        units: list[str] = []
        package = Package(data, layout.kind, layout.doctypes)
        for number, pieces in enumerate(self._paragraphs(package)):
            if spans := spans_of(pieces, language, segment):
                self._spans[number] = spans
                units += units_of(pieces, spans)
        self.units = tuple(units)

    def _paragraphs(self, package: Package) -> Iterator[list[Piece]]:
        for part in self._layout.parts(package):
            yield from self._layout.paragraphs(package.xml(part))

    def rebuild(self, translations: Sequence[str]) -> bytes:
        """The file with the n-th sentence replaced by the n-th translation."""
        if len(translations) != len(self.units):
            raise ValueError(
                f"{len(translations)} translations for a document of {len(self.units)} sentences"
            )
        package = Package(self._data, self._layout.kind, self._layout.doctypes)
        replaced: dict[str, bytes] = {}
        done = number = 0
        for part in self._layout.parts(package):
            root, changed = package.xml(part), False
            for pieces in self._layout.paragraphs(root):
                spans = self._spans.get(number, [])
                if spans:
                    put(pieces, spans, translations[done : done + len(spans)])
                    done, changed = done + len(spans), True
                number += 1
            if changed:
                replaced[part] = serialized(root)
        return package.rebuild(replaced, self._layout.first)
