"""Office Open XML packages (.docx, ``wordfiles``; .pptx, ``slides``): which part is the
document, and which parts a part names.

An OOXML file is an OPC package (ECMA-376 part 2): ``[Content_Types].xml`` gives each part's
content type, ``_rels/.rels`` names the main part (the ``officeDocument`` relationship), and a
part's own relationships, in ``_rels/<its name>.rels`` beside it, name the parts it uses (a
document's headers, a presentation's slides), by an id its XML refers to. Read here with the
package's limits (``packages``); an external relationship (a hyperlink) names no part.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection
from typing import NamedTuple

from mt_cli.documents.packages import Package, resolve

_RELATIONSHIPS = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
_TYPES = "{http://schemas.openxmlformats.org/package/2006/content-types}"
CONTENT_TYPES = "[Content_Types].xml"


class Relationship(NamedTuple):
    """One internal relationship of a part: its id, its type's last word ("header"), its target."""

    id: str
    type: str
    target: str


def relationships_name(part: str) -> str:
    """Where ``part``'s relationships are ("" for the package's own): word/_rels/document.xml.rels."""
    folder, name = posixpath.split(part)
    return posixpath.join(folder, "_rels", f"{name}.rels")


def relationships(package: Package, part: str) -> list[Relationship]:
    """The internal relationships of ``part`` ("" for the package's own), in their order; none
    if it has no relationships part."""
    name = relationships_name(part)
    if name not in package.names:
        return []
    return [
        Relationship(
            found.get("Id", ""),
            found.get("Type", "").rsplit("/", 1)[-1],
            resolve(part, found.get("Target", "")),
        )
        for found in package.xml(name).iter(_RELATIONSHIPS)
        if found.get("TargetMode") != "External"
    ]


def content_type(package: Package, part: str) -> str | None:
    """``part``'s content type by ``[Content_Types].xml``: its override, else its extension's."""
    types = package.xml(CONTENT_TYPES)
    wanted = f"/{part}".casefold()
    for override in types.iter(f"{_TYPES}Override"):
        if override.get("PartName", "").casefold() == wanted:
            return override.get("ContentType")
    extension = posixpath.splitext(part)[1].lstrip(".").casefold()
    for default in types.iter(f"{_TYPES}Default"):
        if default.get("Extension", "").casefold() == extension:
            return default.get("ContentType")
    return None


def main_part(package: Package, types: Collection[str]) -> str:
    """The package's main part, or an InputError if there is none or its content type is not
    one of ``types`` (a presentation named .docx)."""
    if CONTENT_TYPES not in package.names:
        raise package.invalid(f"it has no {CONTENT_TYPES}")
    mains = [found.target for found in relationships(package, "") if found.type == "officeDocument"]
    if not mains:
        raise package.invalid("_rels/.rels names no main document")
    found = content_type(package, mains[0])
    if found not in types:
        raise package.invalid(f"its main part {mains[0]} is {found or 'of no content type'}")
    return mains[0]
