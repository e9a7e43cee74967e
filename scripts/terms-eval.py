# From the repository root, with the term set of scripts/term-testset.py, a run without terms (BASE:
# docs/logs/terms/results.json takes the default recipe's) and one with them (TERMS: the terms
# recipe's), each trained alone for its hour or side by side at equal updates:
#   python scripts/terms-eval.py --testset runs/terms/test2016.tsv --baseline BASE --terms TERMS \
#       -o docs/logs/terms/results.json
# and a terms run's length penalty chosen on val (a term set made with term-testset.py --split val):
#   python scripts/terms-eval.py --split val --testset runs/terms/val.tsv --baseline BASE --terms TERMS \
#       --decodes append,append_glossary --terms-length-penalty 1.5 -o val-1.5.json
"""Term use, BLEU and speed of a model trained with terms (data.terms) against a model without
them, on test2016 (or val: ``--split``) and its term set, beam 5 (each run's own beam and length
penalty, or ``--terms-length-penalty`` for the terms run).

The glossary is the term set's terms (one target per source term). Reported for the baseline (no
glossary: it cannot take one), the terms model without a glossary, and with it: the share of the
set's terms the translation uses, exactly and by lemma (``term-testset.py``), BLEU and chrF on
all of test2016 and BLEU on the sentences with a term, and sentences/s of each decode (one
process after a warm-up; with and without the glossary on the same model, for the ratio, and
with a glossary of 100,000 terms none of which is in test2016).
The terms model with the glossary is also decoded by its CTranslate2 export in int8 (the sources
carry the terms, so the export takes them unchanged), and with ``--glossary-mode guarantee``
(constrained beam search), as is the baseline, which was never taught terms.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path

import sacrebleu

import mt_cli
from mt_cli.config.options import GlossaryMode, TranslateOptions
from mt_cli.text.glossary import Glossary

_spec = importlib.util.spec_from_file_location("term_testset", Path(__file__).with_name("term-testset.py"))
term_testset = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(term_testset)  # type: ignore[union-attr]


def decode(
    run: str,
    sources: list[str],
    glossary: Glossary | None,
    engine: str,
    mode: GlossaryMode = GlossaryMode.APPEND,
    length_penalty: float | None = None,
) -> tuple[list[str], float]:
    """The run's translations of ``sources`` and sentences/s (one process, after a warm-up), with
    the run's own length penalty unless ``length_penalty`` says another."""
    if engine == "mt":
        model = mt_cli.load(run, device="cpu", processes=1, warn=lambda message: None)
    else:  # the run's CTranslate2 export, int8 as `mt serve` decodes it by default
        model = mt_cli.load(run, engine=engine, device="cpu", compute_type="int8", warn=lambda message: None)
    options = TranslateOptions(glossary=glossary, glossary_mode=mode, length_penalty=length_penalty)
    model.translate(sources[:64], options)
    started = time.perf_counter()
    texts = [t.text for t in model.translate(sources, options)]
    return texts, len(sources) / (time.perf_counter() - started)


def scores(texts: list[str], references: list[str], lines: list[int], testset: list) -> dict[str, float]:
    subset = [n - 1 for n in lines]
    return {
        "bleu": round(sacrebleu.corpus_bleu(texts, [references]).score, 2),
        "chrf": round(sacrebleu.corpus_chrf(texts, [references]).score, 2),
        "bleu_term_sentences": round(
            sacrebleu.corpus_bleu([texts[i] for i in subset], [[references[i] for i in subset]]).score, 2
        ),
        **{
            f"term_use_{kind}": value
            for kind, value in term_testset.use(testset, texts).items()
            if kind != "terms"
        },
    }


def summary(found: dict[str, dict[str, float]]) -> dict[str, float]:
    """The headline figures of the decodes ``found``: term use (exact; ``_lemma``: by lemma), BLEU
    and speed ratios."""
    return {
        "term_use_baseline": found["baseline"]["term_use_exact"],
        "term_use_append": found["append_glossary"]["term_use_exact"],
        "term_use_guaranteed": found["guaranteed"]["term_use_exact"],
        "term_use_baseline_lemma": found["baseline"]["term_use_lemma"],
        "term_use_append_lemma": found["append_glossary"]["term_use_lemma"],
        "term_use_guaranteed_lemma": found["guaranteed"]["term_use_lemma"],
        "bleu_baseline": found["baseline"]["bleu"],
        "bleu_append": found["append_glossary"]["bleu"],
        "bleu_append_no_glossary": found["append"]["bleu"],
        "bleu_guaranteed": found["guaranteed"]["bleu"],
        "speed_ratio_glossary": round(
            found["append_glossary"]["sentences_per_s"] / found["append"]["sentences_per_s"], 3
        ),
        # Guaranteed against the same model's unconstrained beam search of the same annotated sources.
        "speed_ratio_guaranteed": round(
            found["guaranteed"]["sentences_per_s"] / found["append_glossary"]["sentences_per_s"], 3
        ),
        "speed_ratio_glossary_matching_nothing": round(
            found["append_glossary_of_100000_matching_nothing"]["sentences_per_s"]
            / found["append"]["sentences_per_s"],
            3,
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--testset", type=Path, required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--terms", required=True)
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument(
        "--decodes", help="comma-separated names of the decodes to run (default: all); the summary needs all"
    )
    parser.add_argument("--outputs", type=Path, help="a folder for each decode's translations, NAME.en")
    parser.add_argument(
        "--split", choices=term_testset.SPLITS, default=term_testset.SPLITS[0], help="the --testset's split"
    )
    parser.add_argument(
        "--terms-length-penalty",
        type=float,
        help="the terms run's length penalty instead of its own (a run trained before its recipe's changed)",
    )
    args = parser.parse_args()
    sources, references = term_testset.split_texts(args.split)
    testset = term_testset.read(args.testset)
    pairs = sorted({(s, t) for _, s, t in testset})
    glossary = Glossary.parse([f"{s}\t{t}" for s, t in pairs], "glossary", "de", "en")
    lines = sorted({n for n, _, _ in testset})
    nothing = Glossary.parse([f"Zzbegriff{i}\tterm{i}" for i in range(100_000)], "glossary", "de", "en")
    guarantee = GlossaryMode.GUARANTEE
    runs = {
        "baseline": (args.baseline, None, "mt", GlossaryMode.APPEND),
        "baseline_guaranteed": (args.baseline, glossary, "mt", guarantee),
        "append": (args.terms, None, "mt", GlossaryMode.APPEND),
        "append_glossary": (args.terms, glossary, "mt", GlossaryMode.APPEND),
        "guaranteed": (args.terms, glossary, "mt", guarantee),
        "append_glossary_of_100000_matching_nothing": (args.terms, nothing, "mt", GlossaryMode.APPEND),
        "append_glossary_ctranslate2_int8": (args.terms, glossary, "ctranslate2", GlossaryMode.APPEND),
    }
    if args.decodes:
        chosen = args.decodes.split(",")
        unknown = ", ".join(sorted(set(chosen) - set(runs)))
        if unknown:
            parser.error(f"--decodes: no decode named {unknown}; choose from {', '.join(runs)}")
        runs = {name: runs[name] for name in chosen}
    found: dict[str, dict[str, float]] = {}
    for name, (run, given, engine, mode) in runs.items():
        penalty = args.terms_length_penalty if run == args.terms else None
        texts, rate = decode(run, sources, given, engine, mode, penalty)
        if args.outputs is not None:  # for `mt eval --hyp A --hyp B --ref REF`'s paired bootstrap
            args.outputs.mkdir(parents=True, exist_ok=True)
            (args.outputs / f"{name}.en").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        found[name] = {**scores(texts, references, lines, testset), "sentences_per_s": round(rate, 1)}
        print(name, json.dumps(found[name]), flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    if args.decodes:  # a partial run: the decodes alone
        args.output.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
        return
    result = {
        "testset": {"terms": len(testset), "sentences": len(lines), "glossary_entries": len(pairs)},
        "runs": {"baseline": args.baseline, "terms": args.terms},
        "terms_length_penalty": args.terms_length_penalty,
        # The references themselves hold 82% of the set's terms exactly: the rest inflected.
        "term_use_reference": term_testset.use(testset, references),
        **summary(found),
        "decodes": found,
    }
    args.output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
