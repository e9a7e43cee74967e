"""OpenDocument text and presentations (.odt, .odp: LibreOffice's own formats, ``--format odt``
and ``odp``): every paragraph and heading translated sentence by sentence, spans, their styles
and everything else kept.

An ODF file is a zip whose first member, ``mimetype``, stored, says what it is; its text is in
``content.xml`` (and, for a text's page headers and footers, ``styles.xml``). It is read here as
zip and XML (``packages``) rather than through odfpy, which loads every part into its own object
tree and writes them all again: the parts with no sentence, and every other member, are copied
byte for byte, and the same limits and refusals hold as for the other packages.

Paragraphs are ``<text:p>`` and ``<text:h>``: in a text's body, lists, tables, frames and notes,
in a presentation's text boxes and speaker notes, and in the header and footer styles of
``styles.xml``. A paragraph's text is its own and that of its ``<text:span>``, ``<text:a>`` and
``<text:meta>`` (nested as deep as they go), with ``<text:s>`` (spaces), ``<text:tab>`` and
``<text:line-break>`` as whitespace; a frame, a note, a field inside it is kept as it is (a
paragraph inside a frame or a note is a paragraph of its own). Its sentences go into its spans as
``runs`` says: a translation takes the style of the span where its sentence began. A
password-protected file (its manifest's ``<manifest:encryption-data>``) is refused in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from mt_cli.documents.packages import Layout, Package
from mt_cli.documents.runs import Piece, mixed_pieces

MIMETYPES = {
    ".odt": "application/vnd.oasis.opendocument.text",
    ".odp": "application/vnd.oasis.opendocument.presentation",
}
_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_MANIFEST = "{urn:oasis:names:tc:opendocument:xmlns:manifest:1.0}"
_PARAGRAPHS = (f"{_TEXT}p", f"{_TEXT}h")
_INLINE = {f"{_TEXT}span", f"{_TEXT}a", f"{_TEXT}meta"}
_SPACES = {f"{_TEXT}s": " ", f"{_TEXT}tab": "\t", f"{_TEXT}line-break": "\n"}  # text:s's count aside
_HEADERS = tuple(f"{_STYLE}{edge}{page}" for edge in ("header", "footer") for page in ("", "-left", "-first"))


def _parts_of(kind: str) -> Callable[[Package], list[str]]:
    def parts(package: Package) -> list[str]:
        """content.xml, then styles.xml if there is one; after the mimetype and encryption checks."""
        mimetype = package.read("mimetype").decode("ascii", "replace").strip()
        if mimetype != MIMETYPES[kind]:
            raise package.invalid(f"its mimetype is {mimetype[:80]!r}, not {MIMETYPES[kind]}")
        if "META-INF/manifest.xml" in package.names:
            encrypted = package.xml("META-INF/manifest.xml").find(f".//{_MANIFEST}encryption-data")
            if encrypted is not None:
                raise package.refused("it is encrypted; save it without a password")
        return ["content.xml"] + [name for name in ("styles.xml",) if name in package.names]

    return parts


def _paragraphs(root: Any) -> Iterator[list[Piece]]:
    """Each paragraph of content.xml; of styles.xml, those of the headers and footers."""
    if root.tag == f"{_OFFICE}document-styles":
        for header in root.iter(*_HEADERS):
            for paragraph in header.iter(*_PARAGRAPHS):
                yield list(mixed_pieces(paragraph, _inline, _space))
    else:
        for paragraph in root.iter(*_PARAGRAPHS):
            yield list(mixed_pieces(paragraph, _inline, _space))


def _inline(element: Any) -> bool:
    return element.tag in _INLINE


def _space(element: Any) -> str | None:
    return _SPACES.get(element.tag)


TEXT = Layout(".odt", _parts_of(".odt"), _paragraphs, first="mimetype")
PRESENTATION = Layout(".odp", _parts_of(".odp"), _paragraphs, first="mimetype")
