"""PowerPoint presentations (.pptx, ``--format pptx``): the text of every slide and its speaker
notes translated sentence by sentence, runs, their formatting and everything else kept.

Slides are read in the presentation's order (``<p:sldIdLst>`` in ``ppt/presentation.xml``, each
id a relationship to a slide part, ``office``), each followed by its notes slide. Their
paragraphs are DrawingML's ``<a:p>``, in every shape, table cell and group; a paragraph's text is
that of its runs (``<a:r>``) and fields (``<a:fld>``, a date, a slide number), a line break
(``<a:br>``) one whitespace character; its sentences go into their runs as ``runs`` says. The
masters and layouts (placeholder prompts), charts and diagrams are not translated; they, and
every part with no sentence, are copied byte for byte (``packages``). python-pptx would save
every part again, so the tests use it only to build and reopen presentations.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mt_cli.documents.office import main_part, relationships
from mt_cli.documents.packages import Layout, Package
from mt_cli.documents.runs import Piece, text_of

_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_RELATIONSHIP_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_RUNS = {f"{_A}r", f"{_A}fld"}  # each holds its text in an <a:t>
_MAIN_TYPES = {  # a presentation, a slide show, a template, and each with macros: the same XML
    f"application/vnd.{kind}.main+xml"
    for kind in (
        "openxmlformats-officedocument.presentationml.presentation",
        "openxmlformats-officedocument.presentationml.slideshow",
        "openxmlformats-officedocument.presentationml.template",
        "ms-powerpoint.presentation.macroEnabled",
        "ms-powerpoint.slideshow.macroEnabled",
        "ms-powerpoint.template.macroEnabled",
    )
}


def _parts(package: Package) -> list[str]:
    """Each slide in the presentation's order, followed by its notes slide if it has one."""
    main = main_part(package, _MAIN_TYPES)
    targets = {found.id: found for found in relationships(package, main)}
    parts: list[str] = []
    for slide in package.xml(main).iter(f"{_P}sldId"):
        found = targets.get(slide.get(_RELATIONSHIP_ID, ""))
        if found is None or found.type != "slide":
            raise package.invalid(f"{main} lists a slide its relationships do not name")
        if found.target in parts:
            continue
        parts.append(found.target)
        notes = [note.target for note in relationships(package, found.target) if note.type == "notesSlide"]
        parts += notes[:1]
    return parts


def _paragraphs(root: Any) -> Iterator[list[Piece]]:
    for paragraph in root.iter(f"{_A}p"):
        yield list(_pieces(paragraph))


def _pieces(paragraph: Any) -> Iterator[Piece]:
    """A piece for the <a:t> of each run and field of ``paragraph``, one for each line break."""
    for child in paragraph:
        if child.tag in _RUNS:
            text = child.find(f"{_A}t")
            if text is not None:
                yield text_of(text)
        elif child.tag == f"{_A}br":
            yield Piece("\n")


LAYOUT = Layout(".pptx", _parts, _paragraphs)
