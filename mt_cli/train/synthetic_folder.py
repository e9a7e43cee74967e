"""Writing the folder of a translated corpus (``synthetic.Synthetic.directory``) from the chunks
kept in its ``.partial`` folder, by one process (rank 0 under torchrun): the pairs, in the
text's order, and their provenance, built under a temporary name and renamed into place whole.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mt_cli.config.options import TranslateOptions
from mt_cli.data import synthetic
from mt_cli.disk.files import temporary_directory_next_to, write_json
from mt_cli.version import __version__


def publish_pairs(
    label: str, made: synthetic.Synthetic, options: TranslateOptions, log: Callable[[str], None]
) -> None:
    """The cache folder written whole from the kept chunks, renamed into place; the chunks removed."""
    with temporary_directory_next_to(made.directory) as staging:
        totals = synthetic.write_pairs(made.partial.chunks(), staging)
        write_json(_provenance(made, options, totals), staging / synthetic.PROVENANCE)
        os.chmod(staging, 0o755)  # mkdtemp makes it private; the pairs are shared like a prepared corpus
        _publish(staging, made.directory)
    made.partial.remove()
    rate = totals.lines / totals.seconds if totals.seconds > 0 else 0.0
    log(
        f"{label}: {totals.pairs:,} synthetic pairs of {totals.lines:,} lines in "
        f"{totals.seconds / 60:.1f} min ({totals.seconds:.0f} s) of translating ({rate:.0f} lines/s)"
        + (f"; {totals.cut:,} lines cut to the model's positions" if totals.cut else "")
    )


def _provenance(
    made: synthetic.Synthetic, options: TranslateOptions, totals: synthetic.Totals
) -> dict[str, Any]:
    first, *ensemble = made.teachers
    return {
        "run": str(first.run),
        "checkpoint": str(first.checkpoint),
        "checkpoint_sha256": first.sha256,
        "ensemble": [
            {"run": str(m.run), "checkpoint": str(m.checkpoint), "checkpoint_sha256": m.sha256}
            for m in ensemble
        ],
        "engine": made.engine,
        "direction": "->".join(made.languages),
        "text": [
            {"file": str(path), "sha256": sha} for path, sha in zip(made.text, made.text_sha256, strict=True)
        ],
        "train_limit": made.train_limit,
        "decoding": options.record(),  # resolved: the run's beam and length penalty
        "lines": totals.lines,
        "pairs": totals.pairs,  # lines times the n-best list
        "cut": totals.cut,  # lines longer than the model's positions, translated from their start
        "seconds": round(totals.seconds, 1),  # translating, summed over every try and rank that kept chunks
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "mt_version": __version__,
        "key": made.key,
    }


def _publish(staging: Path, directory: Path) -> None:
    """Rename the whole folder into place; if another process made the same one meanwhile, keep theirs."""
    try:
        os.replace(staging, directory)
    except OSError:
        if not (directory / synthetic.PROVENANCE).is_file():
            raise
