"""Word documents (.docx, ``--format docx``): every paragraph's text translated sentence by
sentence, its runs, their formatting and everything else in the file kept.

Paragraphs are those of the main document part (tables and text boxes included), then of the
headers, footers, foot- and endnotes it names (``office``), each part once. A paragraph's text is
the text of its runs (``<w:t>``), with a tab or a line break as one whitespace character that no
sentence starts with; its sentences go into their runs as ``runs`` says: a translation takes the
formatting of the run where its sentence began, every run stays. Text between sentences, tabs,
breaks, fields, images and properties are kept; the parts with no sentence, and every member that
is not a part with text, are copied byte for byte (``packages``, which also refuses hostile
files).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from mt_cli.documents.office import main_part, relationships
from mt_cli.documents.packages import Layout, Package
from mt_cli.documents.runs import Piece

_XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_PARAGRAPH, _RUN, _TEXT = f"{_W}p", f"{_W}r", f"{_W}t"
_WHITESPACE = {f"{_W}tab": "\t", f"{_W}br": "\n", f"{_W}cr": "\n"}  # written by a run outside <w:t>
_PARTS = ("header", "footer", "footnotes", "endnotes")  # relationship types' last words
_MAIN_TYPES = {  # a document, a template, and both with macros: the same XML
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml",
    "application/vnd.ms-word.document.macroEnabled.main+xml",
    "application/vnd.ms-word.template.macroEnabledTemplate.main+xml",
}


def _parts(package: Package) -> list[str]:
    """The main document part, then its headers, footers, foot- and endnotes, each once."""
    main = main_part(package, _MAIN_TYPES)
    parts = [main]
    for found in relationships(package, main):
        if found.type in _PARTS and found.target not in parts:
            parts.append(found.target)
    return parts


def _paragraphs(root: Any) -> Iterator[list[Piece]]:
    for paragraph in root.iter(_PARAGRAPH):
        yield list(_pieces(paragraph))


def _pieces(paragraph: Any) -> Iterator[Piece]:
    """A piece for each <w:t>, tab or break of the runs of ``paragraph`` itself, in document
    order, not of a paragraph nested in it (a text box's, read as a paragraph of its own): its
    elements are visited once, however deep they are nested."""
    stack = list(reversed(paragraph))
    while stack:
        element = stack.pop()
        if element.tag == _PARAGRAPH:
            continue
        if element.getparent().tag == _RUN and element.tag == _TEXT:
            yield Piece(element.text or "", _writer(element))
        elif element.getparent().tag == _RUN and element.tag in _WHITESPACE:
            yield Piece(_WHITESPACE[element.tag])
        else:
            stack.extend(reversed(element))


def _writer(text: Any) -> Callable[[str], None]:
    def write(value: str) -> None:
        text.text = value
        text.set(_XML_SPACE, "preserve")  # Word drops a <w:t>'s edge spaces without it

    return write


LAYOUT = Layout(".docx", _parts, _paragraphs)
