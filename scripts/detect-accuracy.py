# PYTHONPATH=. python scripts/detect-accuracy.py [--tune]
"""How well ``mt serve`` tells the language of a text (``mt_cli/serve/detect.py``), on the
Multi30k files mt ships: whole lines and short inputs (1, 2 or 3 words taken from each line).

For the many-to-English model (de, fr, cs -> en), the share of lines whose detected source is
right, and of English lines refused; for each one-direction model (de -> en, fr -> en,
cs -> en), the share of its own lines taken and of the other languages' lines refused (a
``source: "auto"`` request answers 400). Then how often the detected language is right at each
reported confidence, the time per line and the memory. The default is test2016 with the
module's constants; ``--tune`` chooses them on val: the sharpness by log loss of the true
language (no weighting), then the weight by the short inputs of the one-direction models, a
wrong language taken counted twice a wrong refusal (one is silent, the other a 400 that says to
name the source).
"""

from __future__ import annotations

import argparse
import math
import random
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass

from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.serve import detect

LANGUAGES = ("de", "fr", "cs", "en")
MODELS = {  # name: its source languages, all into English
    "de, fr, cs -> en": ("de", "fr", "cs"),
    "de -> en": ("de",),
    "fr -> en": ("fr",),
    "cs -> en": ("cs",),
}
STEMS = {"val": "val", "test2016": "test_2016_flickr"}
SHARPNESS_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0)
WEIGHT_GRID = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
WRONG_TAKEN_COST = 2  # a wrong language taken counts twice a wrong refusal


@dataclass
class Sample:
    """A text in a known language, with lingua's values for it (computed once)."""

    text: str
    language: str
    kind: str  # "line" or "N words"
    values: list


def samples(split: str, detector: detect.Detector, seed: int = 0) -> list[Sample]:
    """Every line of ``split`` in the four languages, and one span of 1, 2 or 3 words of each
    (the count cycles line by line, the place is random), with lingua's values."""
    rng = random.Random(seed)
    found = []
    for lang in LANGUAGES:
        for index, line in enumerate(read_lines(SHIPPED_MULTI30K / f"{STEMS[split]}.{lang}.gz")):
            words = line.split()
            count = min(index % 3 + 1, len(words))
            start = rng.randint(0, len(words) - count)
            span = " ".join(words[start : start + count]).strip(".,;:!?\"'")
            for text, kind in ((line, "line"), (span, f"{count} word{'s' if count > 1 else ''}")):
                found.append(Sample(text, lang, kind, detector.lingua_values(text)))
    return found


def answer(model: detect.Detector, sources: Sequence[str], sample: Sample) -> str:
    """The language a ``source: "auto"`` request takes ``sample`` for (the first source for a
    text with no letters, as the server does)."""
    ranked = model.weigh(sample.text, sample.values)
    return ranked[0].language if ranked else sources[0]


def outcomes(model: detect.Detector, sources: Sequence[str], group: list[Sample]) -> tuple[float, float]:
    """(share of the sources' texts detected right, share of the other languages' texts refused)."""
    own = [s for s in group if s.language in sources]
    others = [s for s in group if s.language not in sources]
    right = sum(answer(model, sources, s) == s.language for s in own)
    refused = sum(answer(model, sources, s) not in sources for s in others)
    return right / max(len(own), 1), refused / max(len(others), 1)


def detector_for(sources: Sequence[str], sharpness: float, weight: float) -> detect.Detector:
    return detect.Detector([*sources, "en"], weight=weight, sharpness=sharpness)


def tune(data: list[Sample]) -> None:
    print("sharpness by log loss of the true language, val, every text (no weighting):")
    losses = {}
    for sharpness in SHARPNESS_GRID:
        model = detector_for((), sharpness, 1.0)
        loss = 0.0
        for s in data:
            found = {g.language: g.confidence / 100 for g in model.weigh(s.text, s.values)}
            loss -= math.log(max(found.get(s.language, 0.0), 1e-9))
        losses[sharpness] = loss / len(data)
        print(f"  {sharpness:.1f}: {losses[sharpness]:.4f}")
    sharpness = min(losses, key=losses.__getitem__)
    print(f"weight at sharpness {sharpness}, val, 1-3 words, one-direction models (taken right / refused):")
    short = [s for s in data if s.kind != "line"]
    scores = {}
    for weight in WEIGHT_GRID:
        cells, total = [], 0.0
        for name, sources in MODELS.items():
            if len(sources) > 1:
                continue
            taken, refused = outcomes(detector_for(sources, sharpness, weight), sources, short)
            total += (taken + WRONG_TAKEN_COST * refused) / (1 + WRONG_TAKEN_COST)
            cells.append(f"{name} {taken:.3f}/{refused:.3f}")
        scores[weight] = total / len(cells)
        print(f"  {weight:>5g}: score {scores[weight]:.4f}  " + "  ".join(cells))
    print(f"chosen: sharpness {sharpness}, weight {max(scores, key=scores.__getitem__):g}")


def report(data: list[Sample], seconds: float) -> None:
    print(f"sharpness {detect.SHARPNESS}, weight {detect.OWN_WEIGHT:g}")
    kinds = {kind: (kind,) for kind in ("line", "1 word", "2 words", "3 words")}
    kinds["1-3 words"] = ("1 word", "2 words", "3 words")
    for name, sources in MODELS.items():
        model = detector_for(sources, detect.SHARPNESS, detect.OWN_WEIGHT)
        for kind, members in kinds.items():
            group = [s for s in data if s.kind in members]
            per = {
                lang: outcomes(model, sources, [s for s in group if s.language == lang]) for lang in LANGUAGES
            }
            right = "  ".join(f"{lang} {per[lang][0]:.4f}" for lang in sources)
            refused = "  ".join(f"{lang} {per[lang][1]:.4f}" for lang in LANGUAGES if lang not in sources)
            taken, other = outcomes(model, sources, group)
            print(f"{name:17} {kind:9} right {taken:.4f} ({right})  refused {other:.4f} ({refused})")
    model = detector_for(MODELS["de, fr, cs -> en"], detect.SHARPNESS, detect.OWN_WEIGHT)
    print("de, fr, cs -> en, 1-3 words of de, fr, cs: right at each confidence of the answer")
    bins = ((0, 50), (50, 80), (80, 95), (95, 101))
    short = [s for s in data if s.kind != "line" and s.language != "en"]
    tops = [(s, ranked[0]) for s in short if (ranked := model.weigh(s.text, s.values))]
    for low, high in bins:
        hits = [guess.language == s.language for s, guess in tops if low <= guess.confidence < high]
        share = sum(hits) / max(len(hits), 1)
        print(f"  confidence {low:>3}-{min(high, 100):<3}: {len(hits):5} texts, {share:.4f} right")
    lines = sum(s.kind == "line" for s in data)
    print(
        f"lingua's values: {1000 * seconds / len(data):.2f} ms a text over {len(data)} texts ({lines} lines)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tune", action="store_true", help="choose the constants on val")
    args = parser.parse_args()
    shared = detect.Detector(())
    started = time.perf_counter()
    shared.lingua_values("Ein Hund.")  # loads the models of the Latin-script languages
    print(f"first detection (models loaded): {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    data = samples("val" if args.tune else "test2016", shared)
    seconds = time.perf_counter() - started
    print(f"peak memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    if args.tune:
        tune(data)
    else:
        report(data, seconds)


if __name__ == "__main__":
    main()
