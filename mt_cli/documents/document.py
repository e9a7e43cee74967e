"""A document as the engine sees it: sentences to translate, and everything else kept as written.

Every format (``plain``, ``pages``) reads its input into one ``Document``: a sequence of parts,
each either source text kept exactly or a ``Sentence``. Its ``units`` are what the engine
translates, in order (a caller puts the units of many documents into one batch), and
``rebuild`` puts one translation per unit back in their places.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mt_cli.documents.inline import Atom, place


@dataclass(frozen=True)
class Sentence:
    unit: str  # what the engine translates
    length: int = 0  # characters of its source text (which ``atoms``' offsets count)
    atoms: tuple[Atom, ...] = ()  # inline markup inside it (HTML only)


@dataclass(frozen=True)
class Document:
    parts: tuple[str | Sentence, ...]
    html: bool = False  # translations are HTML text: escaped, with their sentence's atoms put in

    @property
    def units(self) -> tuple[str, ...]:
        """The sentences to translate, in order."""
        return tuple(part.unit for part in self.parts if isinstance(part, Sentence))

    def rebuild(self, translations: Sequence[str]) -> str:
        """The document with the n-th sentence replaced by the n-th translation."""
        sentences = sum(isinstance(part, Sentence) for part in self.parts)
        if len(translations) != sentences:
            raise ValueError(f"{len(translations)} translations for a document of {sentences} sentences")
        found = iter(translations)
        return "".join(part if isinstance(part, str) else self._put(part, next(found)) for part in self.parts)

    def _put(self, sentence: Sentence, translation: str) -> str:
        return place(translation, sentence.length, sentence.atoms) if self.html else translation


def rebuild_all(documents: Sequence[Document], translations: Sequence[str]) -> list[str]:
    """Each document rebuilt from its share of ``translations``, which hold the units of all
    ``documents`` in order (as one batch translated them)."""
    counts = [len(document.units) for document in documents]
    if sum(counts) != len(translations):
        raise ValueError(f"{len(translations)} translations for documents of {sum(counts)} sentences")
    found, start = [], 0
    for document, count in zip(documents, counts):
        found.append(document.rebuild(translations[start : start + count]))
        start += count
    return found
