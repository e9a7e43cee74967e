"""Decode-time probe: the glossary's terms told with their German words (as --glossary does), in
the training's hidden form ("<term> <to> hound </term>", every match), and not at all.

    python hidden-form.py RUN SPLIT TERMSET LENGTH_PENALTIES
    e.g. python hidden-form.py runs/terms-3draws val runs/terms/val.tsv 2.0
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import sacrebleu

import mt_cli
from mt_cli.config.options import TranslateOptions
from mt_cli.text import terms
from mt_cli.text.glossary import Glossary

_spec = importlib.util.spec_from_file_location("term_testset", Path("scripts/term-testset.py"))
term_testset = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(term_testset)  # type: ignore[union-attr]


def main() -> None:
    run, split, testset_path = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    penalties = [float(value) for value in sys.argv[4].split(",")]
    sources, references = term_testset.split_texts(split)
    testset = term_testset.read(testset_path)
    pairs = sorted({(s, t) for _, s, t in testset})
    glossary = Glossary.parse([f"{s}\t{t}" for s, t in pairs], "glossary", "de", "en")
    model = mt_cli.load(run, device="cpu", processes=1, warn=lambda message: None)
    hidden = []
    for line in sources:
        found = glossary.find(line)
        hidden.append(terms.annotated(line, [(m, m.target) for m in found], frozenset(range(len(found)))))
    # The hidden form goes in as text: placeholder masking would take its markers for tags.
    decodes = (
        ("glossary", sources, glossary, None),
        ("hidden", hidden, None, False),
        ("none", sources, None, None),
    )
    for penalty in penalties:
        for name, lines, given, masking in decodes:
            options = TranslateOptions(glossary=given, length_penalty=penalty, placeholders=masking)
            texts = [t.text for t in model.translate(lines, options)]
            bleu = round(sacrebleu.corpus_bleu(texts, [references]).score, 2)
            print(run, split, name, penalty, json.dumps({"bleu": bleu, **term_testset.use(testset, texts)}))


if __name__ == "__main__":
    main()
