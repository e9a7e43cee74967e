"""The decoding options of ``mt translate`` (sampling, alignments, JSON) and the formats its
results are printed in: plain lines, Moses n-best rows (``i ||| text ||| score``), Pharaoh word
alignments after `` ||| ``, or one JSON object per line. ``mt score``'s lines too.

Formatting lives here, in the command line; ``decode`` and the API return typed results only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mt_cli.cli.common import option
from mt_cli.config.options import GlossaryMode, Sampling
from mt_cli.errors import InputError

if TYPE_CHECKING:
    from mt_cli.decode.results import Alignment, Hypothesis, Score, Translation

SampleOption = option(
    bool, "--sample", help="Draw each translation at random (ancestral sampling) instead of searching."
)
TopKOption = option(int | None, "--top-k", help="With --sample: draw from the K most probable tokens only.")
TopPOption = option(
    float | None,
    "--top-p",
    help="With --sample: draw from the fewest tokens whose probability reaches P, in (0, 1].",
)
TemperatureOption = option(
    float | None,
    "--temperature",
    help="With --sample: divide the logits by T before drawing (default 1; 0 means greedy, no randomness).",
)
SeedOption = option(
    int | None, "--seed", help="With --sample: a line's sample depends on this and the line only (default 0)."
)
AlignOption = option(
    bool, "--align", help="Add Pharaoh word alignments (i-j, 0-based words) after ' ||| ' (mt engine)."
)
AlignmentLayerOption = option(
    int | None,
    "--alignment-layer",
    help="Decoder layer whose cross-attention, averaged over heads, aligns (default: the last; "
    "negative counts from the end).",
)
PlaceholdersOption = option(
    bool | None,
    "--placeholders/--no-placeholders",
    help="Hide {{...}}, {0}, %s, %1$s, <x/> tags, URLs and e-mail addresses from the model and put "
    "each back once (default: where the model was trained with data.placeholders).",
)
GlossaryOption = option(
    Path | None,
    "--glossary",
    help="A TSV file of terms (source term, tab, target term a line) the translation must use; "
    "needs a model trained with data.terms.",
)
GlossaryModeOption = option(
    GlossaryMode,
    "--glossary-mode",
    help="append: the terms are told to the model in the source (a model trained with data.terms); "
    "guarantee: also forced into every translation by constrained beam search (mt engine, any model).",
)
TranslateJsonOption = option(
    bool, "--json", help="One JSON object per line: source, text, score, alignment, n_best."
)


def sampling_from(
    sample: bool, top_k: int | None, top_p: float | None, temperature: float | None, seed: int | None
) -> Sampling | None:
    """The ``Sampling`` the options ask for (checked now), or None without ``--sample``."""
    if not sample:
        given = [
            name
            for name, value in (
                ("--top-k", top_k),
                ("--top-p", top_p),
                ("--temperature", temperature),
                ("--seed", seed),
            )
            if value is not None
        ]
        if given:
            raise InputError(
                f"{', '.join(given)} {'works' if len(given) == 1 else 'work'} only with --sample"
            )
        return None
    return Sampling(
        top_k=top_k,
        top_p=1.0 if top_p is None else top_p,
        temperature=1.0 if temperature is None else temperature,
        seed=0 if seed is None else seed,
    )


def pharaoh(alignment: Alignment) -> str:
    """``i-j`` per (source word, target word) pair, space-separated."""
    return " ".join(f"{i}-{j}" for i, j in alignment)


def translation_lines(
    translations: Sequence[Translation], first_number: int, n_best: bool, align: bool, as_json: bool
) -> list[str]:
    """The output lines of translated input lines numbered from ``first_number`` (0-based, as
    Moses numbers n-best rows): one a line, or with ``n_best`` a row per hypothesis."""
    if as_json:
        return [json.dumps(_translation_json(t, n_best), ensure_ascii=False) for t in translations]
    lines = []
    for number, translation in enumerate(translations, start=first_number):
        hyps = translation.hypotheses if n_best else translation.hypotheses[:1]
        for hyp in hyps:
            fields = [str(number), hyp.text, f"{hyp.score:.4f}"] if n_best else [hyp.text]
            if align:
                fields.append(pharaoh(hyp.alignment or ()))
            lines.append(" ||| ".join(fields))
    return lines


def _hypothesis_json(hyp: Hypothesis) -> dict:
    data: dict = {"text": hyp.text, "score": round(hyp.score, 6)}
    if hyp.alignment is not None:
        data["alignment"] = [list(pair) for pair in hyp.alignment]
    return data


def _translation_json(translation: Translation, n_best: bool) -> dict:
    data = {"source": translation.source, **_hypothesis_json(translation.best)}
    if n_best:
        data["n_best"] = [_hypothesis_json(hyp) for hyp in translation.hypotheses]
    return data


def score_lines(scores: Sequence[Score], per_token: bool, as_json: bool) -> list[str]:
    """Per pair: the summed and the per-token log-probability (natural log), tab-separated, and
    with ``per_token`` each piece with its own (``piece:log_prob``, space-separated)."""
    if as_json:
        return [json.dumps(_score_json(s, per_token), ensure_ascii=False) for s in scores]
    lines = []
    for score in scores:
        fields = [f"{score.log_prob:.4f}", f"{score.mean_log_prob:.4f}"]
        if per_token and score.per_token is not None:
            fields.append(" ".join(f"{piece}:{value:.4f}" for piece, value in score.per_token))
        lines.append("\t".join(fields))
    return lines


def _score_json(score: Score, per_token: bool) -> dict:
    data: dict = {
        "source": score.source,
        "target": score.target,
        "log_prob": score.log_prob,
        "tokens": score.tokens,
        "mean_log_prob": score.mean_log_prob,
    }
    if per_token and score.per_token is not None:
        data["per_token"] = [[piece, value] for piece, value in score.per_token]
    return data
