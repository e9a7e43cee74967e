"""Several systems against one reference: each system's BLEU and chrF, and sacreBLEU's paired
bootstrap resampling of each against the first, as ``sacrebleu REF -i A B -m bleu chrf --paired-bs``.

The test is sacreBLEU's own (``sacrebleu.significance.PairedTest``), not a copy: its resampling,
its seed (12345, or the ``SACREBLEU_SEED`` variable, as for the sacrebleu command) and its
p-value, so that the numbers equal sacreBLEU's on the same files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mt_cli.decode.evaluate import paired_files
from mt_cli.errors import InputError

RESAMPLES = 1000  # sacreBLEU's default for --paired-bs


@dataclass(frozen=True)
class Estimate:
    """One metric of one system."""

    score: float  # on the whole test set, as `mt eval --hyp` alone reports it
    mean: float  # the mean over the bootstrap resamples
    ci: float  # half the width of the 95% confidence interval: mean ± ci
    p_value: float | None  # against the first system (None for the first itself)


@dataclass(frozen=True)
class SystemScores:
    data: str  # the file of translations
    bleu: Estimate
    chrf: Estimate


@dataclass(frozen=True)
class Comparison:
    ref: str
    sentences: int
    resamples: int
    bleu_signature: str  # sacreBLEU's, with the test's settings (bs:1000|seed:12345|...)
    chrf_signature: str
    systems: list[SystemScores]  # the baseline first

    def as_dict(self) -> dict[str, Any]:
        return {"test": "paired bootstrap resampling", **asdict(self)}


def compare_files(hyps: Sequence[Path], ref: Path) -> Comparison:
    """``mt eval --hyp A --hyp B ... --ref R``: every file is read and checked (one line per
    reference line) before anything is scored."""
    if len(set(map(Path.resolve, hyps))) != len(hyps):
        # sacreBLEU refuses a system named twice too; a system compared with itself tells nothing.
        raise InputError("a --hyp file is given twice; give each system once")
    checked = [paired_files(hyp, ref, "--hyp") for hyp in hyps]  # two empty files: an InputError
    references = checked[0][1]
    return compare([(name, lines) for lines, _, name in checked], references, str(ref))


def compare(systems: list[tuple[str, list[str]]], references: list[str], ref_name: str) -> Comparison:
    """Score ``systems`` ((name, hypotheses), the baseline first) and test each against the first."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    metrics = {"BLEU": BLEU(), "chrF": CHRF()}
    test = PairedTest(systems, metrics, references=[references], test_type="bs", n_samples=RESAMPLES)
    signatures, results = test()
    # Both dicts are keyed by sacreBLEU's score names ("BLEU", "chrF2"), in the order of ``metrics``.
    bleu_name, chrf_name = signatures
    estimates = {
        name: [Estimate(r.score, float(r.mean), float(r.ci), r.p_value) for r in results[name]]
        for name in (bleu_name, chrf_name)
    }
    return Comparison(
        ref=ref_name,
        sentences=len(references),
        resamples=test.n_samples,
        bleu_signature=signatures[bleu_name].format(),
        chrf_signature=signatures[chrf_name].format(),
        systems=[
            SystemScores(name, bleu, chrf)
            for (name, _), bleu, chrf in zip(systems, estimates[bleu_name], estimates[chrf_name])
        ],
    )
