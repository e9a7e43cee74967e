"""A user's glossary: source terms and the target terms they must become, read from a
tab-separated file, and found in sentences (longest match first, inflected forms included).

The file holds one entry a line: the source term, a tab, the target term (UTF-8; gzipped if
it ends in .gz). Blank lines and lines that start with ``#`` are skipped. Anything else that
is not two non-empty terms, or a term with a letter outside its language's script, is a
``DataError`` naming the file and the line: a glossary is the user's promise about terms,
so a line mt cannot read is never skipped quietly. The same source term twice with the same
target is one entry; with another target it is an error in a glossary to translate with, and a
second translation in a dictionary that teaches terms (``several_targets``: ``data.terms``).

Matching compares words folded (``fold``: case and, for German, umlauts and ß) and with one
inflectional ending cut (German: -e, -en, -er, -ern, -es, -em, -n, -s; English: -s, -es, -ed,
-ing; where three letters stay): a sentence's word matches a term's word where it is that word
or that word with an ending, or where both are one stem with two endings, so that "Hund" finds
"Hunde", "Hunden" and "Hundes", "Mann" finds "Männer" and "roter Ball" finds "roten Ball"; but
never where the sentence's word is the term's word less an ending ("kann" is no form of
"Kanne", nor "Ent" of "Ente"). At each word the longest term that starts there wins; matches
do not overlap. A sentence is looked up one word at a time in a dict, so a glossary of any size costs
microseconds for a sentence with no term in it.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mt_cli.disk.reading import read_lines
from mt_cli.errors import DataError

WORD = re.compile(r"\w+(?:[-'’]\w+)*")  # a word: letters and digits, inner hyphens and apostrophes
# Endings a sentence's word may have after a term's word.
_ENDINGS = {"de": ("e", "en", "er", "ern", "es", "em", "n", "s"), "en": ("s", "es", "ed", "ing")}
_GERMAN_FOLDS = str.maketrans({"ä": "a", "ö": "o", "ü": "u", "ß": "ss"})
# The script of each language's letters, for the check of a term's letters; other languages
# are not checked.
SCRIPTS = {
    **dict.fromkeys(
        ("cs", "da", "de", "en", "es", "fi", "fr", "it", "nl", "pl", "pt", "ro", "sv", "tr"), "LATIN"
    ),
    **dict.fromkeys(("bg", "ru", "sr", "uk"), "CYRILLIC"),
    "el": "GREEK",
    "ar": "ARABIC",
    "he": "HEBREW",
}


@dataclass(frozen=True)
class Match:
    """A glossary term found in a sentence: its characters ``start:end``, the source term and its
    target terms (one in a glossary to translate with)."""

    start: int
    end: int
    source: str
    targets: tuple[str, ...]

    @property
    def target(self) -> str:
        return self.targets[0]


def fold(word: str, lang: str) -> str:
    """``word`` as glossary matching compares it: case folded; in German also umlauts and ß."""
    key = word.casefold()
    return key.translate(_GERMAN_FOLDS) if lang == "de" else key


@functools.lru_cache(maxsize=1 << 16)  # words repeat: a glossary's, a corpus's
def lemma_candidates(word: str, lang: str) -> tuple[str, ...]:
    """The folded forms whose inflection ``word`` may be: itself, and itself less an ending
    where three letters stay ("Eis" is not a form of "Ei")."""
    key = fold(word, lang)
    cut = [key[: -len(ending)] for ending in _ENDINGS.get(lang, ()) if key.endswith(ending)]
    return (key, *(stem for stem in cut if len(stem) >= 3))


class Glossary:
    """Source terms (in ``src_lang``) and their target terms (in ``tgt_lang``)."""

    def __init__(self, entries: dict[str, tuple[str, ...]], src_lang: str, tgt_lang: str) -> None:
        self.entries = entries
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        # A trie over word forms, each node a dict: a form -> the next node, and at ``_ENDS`` the
        # source term whose words' forms lead there (the first of two terms with the same forms).
        self._root: dict[str | None, Any] = {}
        for source in entries:
            nodes = [self._root]
            for word in WORD.findall(source):
                nodes = [_child(node, form) for node in nodes for form in _term_forms(word, src_lang)]
            for node in nodes:
                node.setdefault(_ENDS, source)

    @classmethod
    def read(cls, path: str | Path, src_lang: str, tgt_lang: str, several_targets: bool = False) -> Glossary:
        """The glossary in the file at ``path``; ``DataError`` naming the line for a line mt cannot
        read, or for a second target of one source term unless ``several_targets``."""
        return cls.parse(read_lines(path), str(path), src_lang, tgt_lang, several_targets)

    @classmethod
    def parse(
        cls, lines: Iterable[str], name: str, src_lang: str, tgt_lang: str, several_targets: bool = False
    ) -> Glossary:
        """The glossary of ``lines`` (a file's, or a request's), errors naming ``name`` and the line."""
        entries: dict[str, list[str]] = {}
        for number, line in enumerate(lines, start=1):
            if not line.strip() or line.startswith("#"):
                continue
            source, target = _entry(line, f"{name} line {number}", src_lang, tgt_lang)
            targets = entries.setdefault(source, [target])
            if target in targets:
                continue
            if not several_targets:
                raise DataError(
                    f"{name} line {number}: {source!r} is already translated as {targets[0]!r} "
                    f"on an earlier line, not {target!r}; keep one"
                )
            targets.append(target)
        return cls({source: tuple(targets) for source, targets in entries.items()}, src_lang, tgt_lang)

    def __eq__(self, other: object) -> bool:
        """Equal terms in the same languages: two requests sending one glossary share a batch
        and the server's cache."""
        if not isinstance(other, Glossary):
            return NotImplemented
        return (self.src_lang, self.tgt_lang, self.entries) == (other.src_lang, other.tgt_lang, other.entries)

    def __hash__(self) -> int:  # only a server hashes a glossary (its batches' and cache's keys)
        return hash(self.fingerprint)

    @functools.cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the languages and terms: equal for equal glossaries, whatever file held them."""
        digest = hashlib.sha256(f"{self.src_lang}\t{self.tgt_lang}\n".encode())
        for source, targets in sorted(self.entries.items()):
            digest.update("\t".join((source, *targets)).encode() + b"\n")
        return digest.hexdigest()

    def __len__(self) -> int:
        return len(self.entries)

    def find(self, sentence: str) -> list[Match]:
        """The terms in ``sentence``, left to right, the longest where several start at one word."""
        words = list(WORD.finditer(sentence))
        forms = [_sentence_forms(word.group(), self.src_lang) for word in words]
        found: list[Match] = []
        i = 0
        while i < len(words):
            best = self._longest_at(forms, i)
            if best is None:
                i += 1
                continue
            length, source = best
            found.append(Match(words[i].start(), words[i + length - 1].end(), source, self.entries[source]))
            i += length
        return found

    def _longest_at(self, forms: list[list[str]], i: int) -> tuple[int, str] | None:
        """(words, source term) of the longest term whose words share a form with the sentence's
        words from ``i`` on; None if no term starts there."""
        best: tuple[int, str] | None = None
        nodes = [self._root]
        for j in range(i, len(forms)):
            nodes = [child for node in nodes for form in forms[j] if (child := node.get(form)) is not None]
            if not nodes:
                break
            ending = next((node[_ENDS] for node in nodes if _ENDS in node), None)
            if ending is not None:
                best = (j - i + 1, ending)
        return best


_ENDS = None  # the key of the term that ends at a trie node (a form is never None)


# The trie's keys: "=" and a word as it is (folded), "-" and a stem (a word less an ending).
def _term_forms(word: str, lang: str) -> tuple[str, ...]:
    """A term word's keys: itself, and its stems."""
    whole, *stems = lemma_candidates(word, lang)
    return (f"={whole}", *(f"-{stem}" for stem in stems))


def _sentence_forms(word: str, lang: str) -> tuple[str, ...]:
    """A sentence word's keys: itself and its stems as whole words (it is a term word, or a term
    word with an ending), and its stems as stems (one stem, two endings); never itself as a stem."""
    whole, *stems = lemma_candidates(word, lang)
    return (f"={whole}", *(f"={stem}" for stem in stems), *(f"-{stem}" for stem in stems))


def _child(node: dict[str | None, Any], form: str) -> dict[str | None, Any]:
    child = node.get(form)
    if child is None:
        child = node[form] = {}
    return child


def _entry(line: str, where: str, src_lang: str, tgt_lang: str) -> tuple[str, str]:
    """A line's (source term, target term), each stripped, or ``DataError`` naming ``where``."""
    fields = line.split("\t")
    if len(fields) != 2:
        raise DataError(
            f"{where}: {len(fields) - 1} tabs; a glossary line is a source term, a tab and a target term"
        )
    source, target = (field.strip() for field in fields)
    for term, side, lang in ((source, "source", src_lang), (target, "target", tgt_lang)):
        if not WORD.search(term):
            raise DataError(f"{where}: the {side} term is empty (or has no letter or digit)")
        if not term.isprintable() and any(unicodedata.category(char) == "Cc" for char in term):
            raise DataError(f"{where}: the {side} term holds a control character")
        if (foreign := _foreign_letter(term, lang)) is not None:
            raise DataError(
                f"{where}: the {side} term {term!r} has {foreign!r}, a letter outside the "
                f"{SCRIPTS[lang].lower()} script of {lang}"
            )
    return source, target


def _foreign_letter(term: str, lang: str) -> str | None:
    """The first letter of ``term`` not in ``lang``'s script (None: all are, or no script known)."""
    script = SCRIPTS.get(lang)
    if script is None or (script == "LATIN" and term.isascii()):
        return None
    for char in term:
        if char.isalpha() and _script(char) != script:
            return char
    return None


@functools.cache
def _script(letter: str) -> str:
    """The first word of the letter's Unicode name: LATIN, CYRILLIC, GREEK, CJK..."""
    return unicodedata.name(letter, "").split(" ", 1)[0]
