"""Scoring with sacreBLEU: BLEU and chrF on detokenized, cased text, with their signatures."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from mt_cli.config.card import target_language
from mt_cli.config.options import DEFAULT_OPTIONS, TranslateOptions
from mt_cli.config.sections import DataConfig
from mt_cli.decode.engine import Engine
from mt_cli.errors import InputError

# Lines translated between two progress-bar updates: big enough that sorting by length within a
# chunk still packs full batches (test2016 is one chunk).
PROGRESS_CHUNK = 1024


@dataclass(frozen=True)
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    sentences: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def score(hypotheses: Sequence[str], references: Sequence[str]) -> Scores:
    """Corpus BLEU (13a, cased) and chrF, as sacreBLEU's command line computes them."""
    from sacrebleu.metrics import BLEU, CHRF

    if len(hypotheses) != len(references):
        raise InputError(f"{len(hypotheses)} hypotheses but {len(references)} references; they must pair up")
    if not references:  # sacreBLEU fails on an empty corpus with an IndexError
        raise InputError("no lines to score; give at least one line and its reference")
    bleu, chrf = BLEU(), CHRF()
    return Scores(
        bleu=bleu.corpus_score(list(hypotheses), [list(references)]).score,
        chrf=chrf.corpus_score(list(hypotheses), [list(references)]).score,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        sentences=len(hypotheses),
    )


@dataclass(frozen=True)
class Evaluation:
    scores: Scores
    hypotheses: list[str]
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        data = self.scores.as_dict()
        data["decode_seconds"] = round(self.seconds, 3)
        data["sentences_per_second"] = round(self.scores.sentences / max(self.seconds, 1e-9), 2)
        return data


def evaluate(
    translate: Callable[[list[str]], list[str]], sources: Sequence[str], references: Sequence[str]
) -> Evaluation:
    """Translate ``sources`` with ``translate(lines) -> lines``, time it, and score it."""
    start = time.perf_counter()
    hypotheses = translate(list(sources))
    seconds = time.perf_counter() - start
    return Evaluation(score(hypotheses, references), hypotheses, seconds)


@dataclass(frozen=True)
class RunEvaluation:
    name: str  # the split, or the source file
    beam: int
    length_penalty: float
    checkpoint: str
    evaluation: Evaluation
    direction: tuple[str, str] | None = None  # of a model with several directions: the one scored

    def as_dict(self) -> dict[str, Any]:
        languages = {} if self.direction is None else dict(zip(("src_lang", "tgt_lang"), self.direction))
        return {
            "data": self.name,
            **languages,
            "beam": self.beam,
            "length_penalty": self.length_penalty,
            "checkpoint": self.checkpoint,
            **self.evaluation.as_dict(),
        }


def direction_of(
    data: DataConfig, src_lang: str | None = None, tgt_lang: str | None = None
) -> tuple[str, str]:
    """The direction a model's split is scored in: ``tgt_lang`` (None: the card's) from
    ``src_lang`` (None: the first source the model translates into that language); an
    ``InputError`` naming what the model knows if it was not trained on it."""
    tgt = target_language(data, tgt_lang, src_lang)
    src = src_lang or next(s for s, t in data.directions() if t == tgt)
    return src, tgt


def evaluate_run(
    engine: Engine,
    split: str,
    src: Path | None,
    ref: Path | None,
    options: TranslateOptions = DEFAULT_OPTIONS,
) -> RunEvaluation:
    """Translate a split of the model's corpus (or ``src``) with ``engine`` and ``options``
    (checked before anything is read) and score it, in the direction the options' ``src_lang``
    and ``tgt_lang`` name (``direction_of``)."""
    from tqdm import tqdm

    from mt_cli.disk.reading import batched

    if (src is None) != (ref is None):
        raise InputError("--src and --ref go together: give both files or neither")
    direction = direction_of(engine.card.data, options.src_lang, options.tgt_lang)
    options = engine.resolve(replace(options, tgt_lang=direction[1], scores=False))
    if src is not None and ref is not None:
        sources, references, name = paired_files(src, ref, "--src")
    else:
        from mt_cli.data.corpus import load_corpus

        corpus = load_corpus(engine.card.data.direction_entry(direction), [split])[split]
        sources, references, name = corpus["src"], corpus["tgt"], split

    def translate(lines: list[str]) -> list[str]:
        out: list[str] = []
        with tqdm(
            total=len(lines), desc=f"translating {name}", unit="line", leave=False, disable=None
        ) as bar:
            for chunk in batched(iter(lines), PROGRESS_CHUNK):
                out += engine.translate_lines(chunk, options)
                bar.update(len(chunk))
        return out

    several = len(engine.card.data.directions()) > 1
    evaluation = evaluate(translate, sources, references)
    return RunEvaluation(
        name, options.beam_size, options.alpha, engine.origin, evaluation, direction if several else None
    )


def score_files(hyp: Path, ref: Path) -> Scores:
    """``mt eval --hyp FILE --ref FILE``: score translations someone already made, like ``sacrebleu -i``."""
    hypotheses, references, _ = paired_files(hyp, ref, "--hyp")
    return score(hypotheses, references)


def paired_files(first: Path, ref: Path, option: str) -> tuple[list[str], list[str], str]:
    """(lines of ``first``, lines of ``ref``, the name of ``first``); a different number of lines
    is an InputError that names both files and both counts, and so are two empty files."""
    from mt_cli.disk.reading import check_input_file, read_lines

    check_input_file(first, option)
    check_input_file(ref, "--ref")
    lines, references = read_lines(first), read_lines(ref)
    if len(lines) != len(references):
        raise InputError(f"{first} has {len(lines)} lines but {ref} has {len(references)}; they must pair up")
    if not references:
        raise InputError(f"{option} {first} and --ref {ref} are empty; there is nothing to score")
    return lines, references, str(first)
