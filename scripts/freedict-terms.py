# After `apt-get install dict-freedict-deu-eng` (FreeDict's German-English dictionary, from Ding;
# GPLv3/AGPLv3: the TSV made from it is not shipped with mt), from the repository root:
#   python scripts/freedict-terms.py -o runs/terms/freedict-de-en.tsv
"""A bilingual term dictionary (source term, tab, target term a line) from FreeDict's dictd files,
for `data.terms` and for the term test set (scripts/term-testset.py).

Kept: headwords of one to three words (letters, hyphens and spaces) that are nouns, verbs or
adjectives, and each of their translations of one to three words of letters, hyphens and
apostrophes, with the part-of-speech marks (``<n>``), usage labels (``[coll.]``) and parentheses
taken off; translations with ``sth.``, ``sb.``, a slash or an ellipsis are left out. Left out as
well: headwords with a word that shares a form with one of the --skip-frequent most frequent words
of Multi30k's task-1 German training text (articles, prepositions, "Mann", "Frau", and "Zweier" for
"zwei": words any model already translates, which would swamp both the training annotations and
the test set), and translations equal to their headword.
"""

from __future__ import annotations

import argparse
import gzip
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.text.glossary import WORD, lemma_candidates

DICTD = Path("/usr/share/dictd")
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_HEADWORD = re.compile(r"[^\W\d_]+(?:[- ][^\W\d_]+){0,2}")
_TRANSLATION = re.compile(r"[A-Za-z][A-Za-z'-]*(?: [A-Za-z][A-Za-z'-]*){0,2}")
_KINDS = ("n", "v", "adj")  # part-of-speech marks of a kept headword


def number(encoded: str) -> int:
    """A dictd index number (base 64)."""
    value = 0
    for char in encoded:
        value = value * 64 + _B64.index(char)
    return value


def entries(name: str) -> Iterator[str]:
    """The text of each entry of the dictd dictionary ``name``."""
    raw = gzip.open(DICTD / f"{name}.dict.dz").read()
    for line in (DICTD / f"{name}.index").read_text(encoding="utf-8").splitlines():
        word, offset, length = line.split("\t")
        if not word.startswith("00-"):  # the database's own header entries
            yield raw[number(offset) : number(offset) + number(length)].decode("utf-8")


def pairs(entry: str) -> Iterator[tuple[str, str]]:
    """(headword, translation) of one entry, filtered as the module says."""
    lines = entry.split("\n")
    if len(lines) < 2:
        return
    head, marks = re.match(r"([^/<]*)(?:/[^/]*/)?\s*(?:<([^>]*)>)?", lines[0]).groups()  # type: ignore[union-attr]
    headword = head.strip()
    kinds = {mark.strip() for mark in (marks or "").split(",")}
    if not _HEADWORD.fullmatch(headword) or kinds.isdisjoint(_KINDS):
        return
    for part in _top_level(re.sub(r"^\s*\[[^\]]*\]\s*", "", lines[1])):
        if any(mark in part for mark in ("sth.", "sb.", "/", "…", "...")):
            continue
        translation = " ".join(re.sub(r"<[^>]*>|\[[^\]]*\]|\([^)]*\)", " ", part).split())
        if _TRANSLATION.fullmatch(translation) and translation.lower() != headword.lower():
            yield headword, translation


def _top_level(line: str) -> list[str]:
    """``line`` cut at the commas outside brackets and parentheses."""
    parts, depth, current = [], 0, []
    for char in line:
        depth += char in "([<" and 1 or (char in ")]>" and -1 or 0)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def frequent_forms(count: int) -> set[str]:
    """The word forms (``glossary.lemma_candidates``) of the ``count`` most frequent words of the
    task-1 German training text."""
    text = read_lines(SHIPPED_MULTI30K / "train.de.gz")
    words = Counter(word for line in text for word in WORD.findall(line))
    return {form for word, _ in words.most_common(count) for form in lemma_candidates(word, "de")}


def is_frequent(headword: str, forms: set[str]) -> bool:
    """Whether a word of ``headword`` shares a form with a frequent word: "Zweier" with "zwei",
    "Schwärzen" with "schwarzen"."""
    return any(not forms.isdisjoint(lemma_candidates(word, "de")) for word in WORD.findall(headword))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dictionary", default="freedict-deu-eng")
    parser.add_argument("--skip-frequent", type=int, default=300)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    skip = frequent_forms(args.skip_frequent)
    kept: dict[tuple[str, str], None] = {}
    for entry in entries(args.dictionary):
        for headword, translation in pairs(entry):
            if not is_frequent(headword, skip):
                kept.setdefault((headword, translation))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("".join(f"{s}\t{t}\n" for s, t in kept), encoding="utf-8")
    print(f"{len(kept):,} term pairs of {len({s for s, _ in kept}):,} headwords -> {args.output}")


if __name__ == "__main__":
    main()
