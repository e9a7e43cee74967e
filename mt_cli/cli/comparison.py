"""How ``mt eval --hyp A --hyp B ...`` prints a comparison: a table, or one JSON object.

The cells read as sacreBLEU's own table (``sacrebleu R -i A B --paired-bs``): score, then the
bootstrap mean ± the 95% confidence interval, then the p-value against the first system, with a
star where it is below 0.05.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from mt_cli.decode.significance import Comparison, Estimate


def print_comparison(comparison: Comparison, bleu: bool, as_json: bool) -> None:
    """``bleu``: False leaves BLEU out of the table (``--no-bleu``); JSON always has both."""
    if as_json:
        typer.echo(json.dumps(comparison.as_dict(), indent=2))
        return
    baseline = comparison.systems[0].data
    typer.echo(
        f"{comparison.ref}: {comparison.sentences} sentences; score (bootstrap mean ± 95% CI) and "
        f"p-value against {baseline} (paired bootstrap resampling, {comparison.resamples} resamples)"
    )
    rows = [
        [system.data + (" (baseline)" if system.data == baseline else "")]
        + ([f"BLEU = {cell(system.bleu)}"] if bleu else [])
        + [f"chrF = {cell(system.chrf)}"]
        for system in comparison.systems
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        typer.echo("  ".join(text.ljust(width) for text, width in zip(row, widths)).rstrip())
    if bleu:
        typer.echo(f"BLEU signature: {comparison.bleu_signature}")
    typer.echo(f"chrF signature: {comparison.chrf_signature}")


def cell(estimate: Estimate) -> str:
    """e.g. "36.02 (36.01 ± 1.21) (p = 0.0123)*", as sacreBLEU writes it."""
    text = f"{estimate.score:.2f} ({estimate.mean:.2f} ± {estimate.ci:.2f})"
    if estimate.p_value is None:
        return text
    return text + f" (p = {estimate.p_value:.4f})" + ("*" if estimate.p_value <= 0.05 else "")
