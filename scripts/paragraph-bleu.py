"""Paragraphs against lines: Multi30k test2016 joined into paragraphs of 5 sentences, translated as
documents (``Model.translate_documents``: each paragraph split into sentences by sentencex, all
sentences in one batch, put back), against the same model's line-by-line translations joined the
same way, both scored with sacreBLEU against the English references joined the same way; and,
for contrast, each paragraph translated as one unit, as mt did before it split sentences. Also
the splitter's boundary accuracy on the paragraphs of de, fr and cs.

    PYTHONPATH=. python scripts/paragraph-bleu.py --run runs/multi30k-bt-finetune \
        --out docs/logs/paragraph-bleu.json
    PYTHONPATH=. python scripts/paragraph-bleu.py --splitter-only train --lines 5000  # held out

A boundary is the place between two joined sentences, counted in non-space characters, so that
whitespace never decides a match. Recall: true boundaries found; precision: boundaries found
that are true; exact: paragraphs split exactly into their 5 sentences. Some test2016 lines end
without a period: recall is also given over the boundaries after a line that ends in . ! or ?.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections import Counter
from pathlib import Path

import sacrebleu

import mt_cli
from mt_cli.disk.reading import read_lines
from mt_cli.documents.sentences import Span, segmenter, sentence_spans

DATA = Path(__file__).resolve().parent.parent / "data" / "multi30k"
SIZE = 5  # sentences a paragraph


def paragraphs(lines: list[str]) -> list[list[str]]:
    return [lines[i : i + SIZE] for i in range(0, len(lines), SIZE)]


def non_space(text: str) -> int:
    return sum(not char.isspace() for char in text)


def boundaries(text: str, spans: list[Span]) -> set[int]:
    """The places between consecutive sentences, as non-space characters before each later one."""
    return {non_space(text[:start]) for start, _ in spans[1:]}


def accuracy(
    language: str, split: str = "test_2016_flickr", limit: int | None = None
) -> dict[str, float | int]:
    segment = segmenter()
    count: Counter[str] = Counter()
    groups = paragraphs(read_lines(DATA / f"{split}.{language}.gz")[:limit])
    for group in groups:
        text = " ".join(group)
        truth, ended, done = set(), set(), 0
        for line in group[:-1]:
            done += non_space(line)
            truth.add(done)
            if line.rstrip()[-1:] in (".", "!", "?"):
                ended.add(done)
        predicted = boundaries(text, sentence_spans(text, language, segment))
        count.update(
            found=len(predicted),
            true=len(truth),
            right=len(predicted & truth),
            ended=len(ended),
            right_ended=len(predicted & ended),
            exact=predicted == truth,
        )
    return {
        "boundaries": count["true"],
        "recall": count["right"] / count["true"],
        "precision": count["right"] / count["found"],
        "boundaries_after_end_punctuation": count["ended"],
        "recall_after_end_punctuation": count["right_ended"] / count["ended"],
        "paragraphs_exact": count["exact"] / len(groups),
    }


BLEU = sacrebleu.BLEU()


def bleu(hypotheses: list[str], references: list[str]) -> float:
    return BLEU.corpus_score(hypotheses, [references]).score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, help="a trained de->en run directory")
    parser.add_argument("--out", type=Path, help="write the results here as JSON")
    parser.add_argument(
        "--splitter-only",
        choices=("val", "train"),
        help="only the splitter's boundaries on this split's paragraphs",
    )
    parser.add_argument("--lines", type=int, help="with --splitter-only: its first N lines")
    args = parser.parse_args()
    if args.splitter_only is not None:
        counts = {
            language: accuracy(language, args.splitter_only, args.lines) for language in ("de", "fr", "cs")
        }
        print(json.dumps(counts, indent=2))
        return
    if args.run is None:
        parser.error("--run is required (or --splitter-only)")

    source = read_lines(DATA / "test_2016_flickr.de.gz")
    references = [" ".join(group) for group in paragraphs(read_lines(DATA / "test_2016_flickr.en.gz"))]
    texts = [" ".join(group) for group in paragraphs(source)]
    model = mt_cli.load(args.run, device="cpu")
    timings, started = {}, time.perf_counter()
    lines = [translation.text for translation in model.translate(source)]
    timings["lines_s"], started = time.perf_counter() - started, time.perf_counter()
    split = model.translate_documents(texts)
    timings["paragraphs_s"], started = time.perf_counter() - started, time.perf_counter()
    whole = [translation.text for translation in model.translate(texts)]
    timings["whole_paragraphs_s"] = time.perf_counter() - started
    joined = [" ".join(group) for group in paragraphs(lines)]
    results = {
        "run": str(args.run),
        "machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}",
        "paragraphs": len(texts),
        "bleu_lines_joined": bleu(joined, references),
        "bleu_paragraphs_split": bleu(split, references),
        "bleu_paragraphs_as_one_unit": bleu(whole, references),
        "bleu_sentences": bleu(lines, read_lines(DATA / "test_2016_flickr.en.gz")),
        "paragraphs_equal_to_joined_lines": sum(a == b for a, b in zip(split, joined)),
        "signature": str(BLEU.get_signature()),
        "seconds": timings,
        "splitter": {language: accuracy(language) for language in ("de", "fr", "cs")},
    }
    results["bleu_difference"] = results["bleu_paragraphs_split"] - results["bleu_lines_joined"]
    text = json.dumps(results, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
