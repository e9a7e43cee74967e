"""E-books (.epub, ``--format epub``): the text of every content document in the book's reading
order translated sentence by sentence, inline markup and everything else kept, each document
still well-formed XML.

An EPUB is a zip whose first member, ``mimetype``, stored, says ``application/epub+zip``;
``META-INF/container.xml`` names the package document (the OPF), whose spine lists the content
documents in reading order through its manifest. Those that are XHTML are translated (an SVG page
or a fallback is not); the navigation and NCX tables of contents, the metadata, styles, fonts and
images are copied byte for byte (``packages``). A book whose content documents
``META-INF/encryption.xml`` lists (DRM) is refused in one line; obfuscated fonts are fine.

XHTML is read as XML (lxml, through ``packages``), not by mt's HTML reader (``pages``): it is XML,
with namespaces, CDATA and entity references an HTML tokenizer does not keep as XML, and
written back it must stay well-formed. A content document's text flows through its elements: an
inline element (``<em>``, ``<a>``, ``<span>``, ...) is part of the text around it, ``<br>`` a
line break in it, ``<script>``, ``<style>``, ``<img>``, ruby annotations and other vocabularies
(SVG, MathML) are kept as they are, and every other element (``<p>``, ``<h1>``, ``<li>``,
``<td>``, ``<title>``, ...) begins and ends a paragraph. Its sentences go into their text nodes as
``runs`` says: a translation takes the markup of the text node where its sentence began. EPUB 2's
DOCTYPE is allowed and never read; one that declares anything is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mt_cli.documents.packages import Layout, Package, resolve
from mt_cli.documents.runs import Piece, tail_of, text_of

MIMETYPE = "application/epub+zip"
_CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_OPF = "{http://www.idpf.org/2007/opf}"
_CIPHER = "{http://www.w3.org/2001/04/xmlenc#}CipherReference"
_XHTML = "http://www.w3.org/1999/xhtml"
_INLINE = frozenset(
    "a abbr b bdi bdo big cite code data del dfn em font i ins kbd label mark q ruby s samp small "
    "span strike strong sub sup time tt u var".split()
)
_KEPT = frozenset(  # no text to translate in them, but text around them flows on
    "audio button canvas embed iframe img input math noscript object rp rt script select style svg "
    "textarea video wbr".split()
)


def _parts(package: Package) -> list[str]:
    """The XHTML content documents of the spine, in reading order, each once."""
    mimetype = package.read("mimetype").decode("ascii", "replace").strip()
    if mimetype != MIMETYPE:
        raise package.invalid(f"its mimetype is {mimetype[:80]!r}, not {MIMETYPE}")
    rootfile = package.xml("META-INF/container.xml").find(f".//{_CONTAINER}rootfile")
    if rootfile is None or not rootfile.get("full-path"):
        raise package.invalid("META-INF/container.xml names no package document")
    opf = resolve("", rootfile.get("full-path", ""))
    book = package.xml(opf)
    items = {item.get("id"): item for item in book.iter(f"{_OPF}item")}
    parts: list[str] = []
    for reference in book.iter(f"{_OPF}itemref"):
        item = items.get(reference.get("idref"))
        if item is None:
            raise package.invalid(f"its spine names {reference.get('idref')!r}, which its manifest lacks")
        target = resolve(opf, item.get("href", ""))
        if item.get("media-type") == "application/xhtml+xml" and target not in parts:
            parts.append(target)
    _check_not_encrypted(package, parts)
    return parts


def _check_not_encrypted(package: Package, parts: list[str]) -> None:
    if "META-INF/encryption.xml" not in package.names:
        return
    for cipher in package.xml("META-INF/encryption.xml").iter(_CIPHER):
        if resolve("", cipher.get("URI", "")) in parts:
            raise package.refused("its text is encrypted (DRM); mt reads only books without it")


def _paragraphs(root: Any) -> Iterator[list[Piece]]:
    """The runs of text between two block elements' edges, each list a paragraph."""
    paragraph: list[Piece] = []
    for piece in _flow(root):
        if piece is not None:
            paragraph.append(piece)
        elif paragraph:
            yield paragraph
            paragraph = []
    if paragraph:
        yield paragraph


def _flow(root: Any) -> Iterator[Piece | None]:
    """The pieces of ``root``'s text and its descendants', None at each block's edges; a loop
    over a stack, so a piece costs the same however deep it is."""
    stack: list[Any] = [root]  # pieces, edges (None) and elements to read, the next one last
    while stack:
        item = stack.pop()
        if item is None or isinstance(item, Piece):
            yield item
            continue
        yield text_of(item)
        for child in reversed(item):
            stack.append(tail_of(child))
            kind = _kind(child)
            if kind == "block":
                stack += [None, child, None]
            elif kind == "inline":
                stack.append(child)
            elif kind == "break":
                stack.append(Piece("\n"))


def _kind(element: Any) -> str:
    """ "inline", "break", "block", or "kept" (a comment, an entity reference, an image, a
    script, an element of another vocabulary)."""
    if not isinstance(element.tag, str):
        return "kept"
    namespace, _, name = element.tag[1:].rpartition("}") if element.tag[0] == "{" else ("", "", element.tag)
    if namespace not in ("", _XHTML) or name in _KEPT:
        return "kept"
    if name == "br":
        return "break"
    return "inline" if name in _INLINE else "block"


LAYOUT = Layout(".epub", _parts, _paragraphs, first="mimetype", doctypes=True)
