# From the repository root, with the dictionary of scripts/freedict-terms.py:
#   python scripts/term-testset.py --dictionary runs/terms/freedict-de-en.tsv -o runs/terms/test2016.tsv
# and the term use of translations of test2016 (one line per source line):
#   python scripts/term-testset.py --dictionary ... --testset runs/terms/test2016.tsv --hypotheses out.en
# (--split val: the same of the validation set, where a length penalty is chosen)
"""A term test set from test2016 and a bilingual dictionary, and the term use of translations.

The method (as Dinu et al. 2019 build theirs from Wiktionary and IATE): a dictionary term counts
in a test2016 sentence where the German source holds it (``text.glossary``: folded, an inflected
form matches, longest match first) and one of its dictionary translations is in the English
reference (as a word, or with an English ending). The set is one line per (sentence, term): the
1-based line number, the source term and that translation, tab-separated; a source term that the
references translate in several ways keeps its most frequent one (the lines with another are
left out), so that the set's terms are the glossary to translate it with. A translation uses a
term exactly where it holds the target term as words (case-insensitive), and by lemma where each
target word matches a word of the translation with an English ending cut ("dogs" uses "dog").
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.text.glossary import WORD, Glossary, lemma_candidates

SPLITS = ("test_2016_flickr", "val")  # the shipped files' names


def split_texts(split: str) -> tuple[list[str], list[str]]:
    """The shipped German sources and English references of ``split`` (one of ``SPLITS``)."""
    return read_lines(SHIPPED_MULTI30K / f"{split}.de.gz"), read_lines(SHIPPED_MULTI30K / f"{split}.en.gz")


def read(path: Path) -> list[tuple[int, str, str]]:
    """A term set written by ``main``: (line, source term, target term)."""
    return [(int(n), s, t) for n, s, t in (line.split("\t") for line in read_lines(path) if line)]


def build(dictionary: Glossary, sources: list[str], references: list[str]) -> list[tuple[int, str, str]]:
    """(line, source term, target term) of each dictionary term whose translation the line's
    reference holds; a source term the references translate in several ways keeps its most
    frequent translation, and the lines with another are left out, so that the set's terms are
    one glossary."""
    found = []
    for number, (source, reference) in enumerate(zip(sources, references, strict=True), start=1):
        forms = {form for word in WORD.findall(reference) for form in lemma_candidates(word, "en")}
        for match in dictionary.find(source):
            held = next((term for term in match.targets if _held(forms, term)), None)
            if held is not None:
                found.append((number, match.source, held))
    counts = Counter((term, target) for _, term, target in found)
    chosen: dict[str, str] = {}
    for (term, target), _ in counts.most_common():
        chosen.setdefault(term, target)
    return [(n, term, target) for n, term, target in found if chosen[term] == target]


def _held(forms: set[str], term: str) -> bool:
    return all(not forms.isdisjoint(lemma_candidates(word, "en")) for word in WORD.findall(term))


def exact(hypothesis: str, term: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(term.lower())}(?!\w)", hypothesis.lower()) is not None


def use(testset: list[tuple[int, str, str]], hypotheses: list[str]) -> dict[str, float | int]:
    lemma = sum(
        _held(
            {form for word in WORD.findall(hypotheses[n - 1]) for form in lemma_candidates(word, "en")}, term
        )
        for n, _, term in testset
    )
    hits = sum(exact(hypotheses[n - 1], term) for n, _, term in testset)
    return {
        "terms": len(testset),
        "exact": round(hits / len(testset), 4),
        "lemma": round(lemma / len(testset), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dictionary", type=Path, required=True)
    parser.add_argument("--testset", type=Path, help="score --hypotheses on this set, made before")
    parser.add_argument("--hypotheses", type=Path)
    parser.add_argument("-o", "--output", type=Path, help="write the set here")
    parser.add_argument("--split", choices=SPLITS, default=SPLITS[0], help="the Multi30k split")
    args = parser.parse_args()
    if args.testset is not None:
        print(json.dumps(use(read(args.testset), read_lines(args.hypotheses))))
        return
    dictionary = Glossary.read(args.dictionary, "de", "en", several_targets=True)
    sources, references = split_texts(args.split)
    testset = build(dictionary, sources, references)
    args.output.write_text("".join(f"{n}\t{s}\t{t}\n" for n, s, t in testset), encoding="utf-8")
    lines = sorted({n for n, _, _ in testset})
    where = f"{len(lines):,} of {args.split}'s {len(sources):,} sentences"
    print(f"{len(testset):,} terms in {where} -> {args.output}")


if __name__ == "__main__":
    main()
