# From the repository root:  python scripts/glossary-speed.py
"""How long a glossary of 100,000 entries takes to read, and to look up in test2016's 1,000
German sentences: once with none of its terms there, once with 100,000 of the task-1 training
vocabulary's words and word pairs as terms (many matches). Median of 5 runs each."""

from __future__ import annotations

import re
import statistics
import tempfile
import time
from pathlib import Path

from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.text.glossary import Glossary

ENTRIES = 100_000


def timed(action) -> float:
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        action()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def vocabulary_terms() -> list[str]:
    """Task-1 training words, then word pairs, distinct, until there are ENTRIES."""
    terms: dict[str, None] = {}
    for line in read_lines(SHIPPED_MULTI30K / "train.de.gz"):
        words = re.findall(r"\w+", line)
        for term in [*words, *(" ".join(pair) for pair in zip(words, words[1:]))]:
            terms.setdefault(term)
            if len(terms) == ENTRIES:
                return list(terms)
    return list(terms)


def main() -> None:
    sentences = read_lines(SHIPPED_MULTI30K / "test_2016_flickr.de.gz")
    with tempfile.TemporaryDirectory() as folder:
        for name, terms in (
            ("no term in test2016", [f"Zzbegriff{i}" for i in range(ENTRIES)]),
            ("training words and pairs", vocabulary_terms()),
        ):
            path = Path(folder) / "glossary.tsv"
            path.write_text("".join(f"{term}\tterm {i}\n" for i, term in enumerate(terms)), encoding="utf-8")
            glossary = Glossary.read(path, "de", "en")
            read_s = timed(lambda path=path: Glossary.read(path, "de", "en"))
            find_s = timed(lambda glossary=glossary: [glossary.find(sentence) for sentence in sentences])
            matches = sum(len(glossary.find(sentence)) for sentence in sentences)
            print(
                f"{name}: {len(glossary):,} entries read in {read_s:.2f} s; test2016's "
                f"{len(sentences):,} sentences looked up in {find_s * 1000:.1f} ms "
                f"({find_s / len(sentences) * 1e6:.0f} us a sentence), {matches:,} matches"
            )


if __name__ == "__main__":
    main()
