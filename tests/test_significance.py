"""`mt eval --hyp A --hyp B ... --ref R`: the numbers of `sacrebleu R -i A B --paired-bs`, checked
against the real sacrebleu command on the same files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mt_cli.cli import app
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K

# "17.08 (17.09 ± 1.79)" and "(p = 0.0010)*": a score with its bootstrap mean and 95% CI, a p-value.
CELL = re.compile(r"\d+\.\d+ \(\d+\.\d+ ± \d+\.\d+\)")
P_VALUE = re.compile(r"\(p = \d\.\d{4}\)\*?")


def drop_every(line: str, k: int) -> str:
    return " ".join(word for i, word in enumerate(line.split()) if i % k != k - 1)


@pytest.fixture(scope="module")
def systems(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """300 Multi30k val references and three degraded copies of them: (ref, [a, b, c]); b is far
    from a (p = 0.001, the floor of 1,000 resamples), c differs from a in every 40th line (p > 0.05)."""
    root = tmp_path_factory.mktemp("systems")
    refs = read_lines(SHIPPED_MULTI30K / "val.en.gz")[:300]
    outputs = {
        "ref.en": refs,
        "a.en": [drop_every(line, 3) for line in refs],
        "b.en": [drop_every(line, 4 if i % 2 else 2) for i, line in enumerate(refs)],
        "c.en": [drop_every(line, 3 if i % 40 else 4) for i, line in enumerate(refs)],  # close to a
    }
    for name, lines in outputs.items():
        (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root / "ref.en", [root / name for name in ("a.en", "b.en", "c.en")]


def sacrebleu(*args: str | Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "sacrebleu", *map(str, args), "--paired-bs", "--no-color"],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def mt_eval(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["eval", *map(str, args)])
    return result.exit_code, result.stdout, result.stderr


def test_the_table_prints_sacrebleus_scores_intervals_and_p_values(systems) -> None:
    ref, hyps = systems
    code, out, err = mt_eval(*(f"--hyp={h}" for h in hyps), "--ref", ref)
    assert code == 0, err
    theirs = sacrebleu(ref, "-i", *hyps, "-m", "bleu", "chrf", "-f", "text", "--width", "2")
    # Their table is a metric per column, ours a metric per column too: the same cells, row by row.
    assert CELL.findall(out) == CELL.findall(theirs) and len(CELL.findall(out)) == 6
    assert P_VALUE.findall(out) == P_VALUE.findall(theirs) and len(P_VALUE.findall(out)) == 4
    assert "nrefs:1|bs:1000|seed:12345|case:mixed|eff:no|tok:13a|smooth:exp" in out
    assert out.splitlines()[1].startswith(f"{hyps[0]} (baseline)")


def test_json_has_sacrebleus_exact_values(systems) -> None:
    ref, hyps = systems
    code, out, err = mt_eval(*(f"--hyp={h}" for h in hyps), "--ref", ref, "--json")
    assert code == 0, err
    ours = json.loads(out)
    # sacreBLEU's own --format json (BLEU only: with chrF it fails on a float32 in 2.6).
    theirs = json.loads(sacrebleu(ref, "-i", *hyps, "-m", "bleu", "-f", "json"))
    assert ours["ref"] == str(ref) and ours["sentences"] == 300 and ours["resamples"] == 1000
    assert [s["data"] for s in ours["systems"]] == [str(h) for h in hyps]
    assert [s["bleu"] for s in ours["systems"]] == [system["BLEU"] for system in theirs]
    baseline, *others = ours["systems"]
    assert baseline["bleu"]["p_value"] is None and baseline["chrf"]["p_value"] is None
    assert all(0 < s[metric]["p_value"] <= 1 for s in others for metric in ("bleu", "chrf"))
    assert others[0]["bleu"]["p_value"] < 0.002 < 0.05 < others[1]["bleu"]["p_value"]
    assert set(baseline["chrf"]) == {"score", "mean", "ci", "p_value"}
    # One system alone keeps today's output: its score equals its score in the comparison.
    code, alone, err = mt_eval("--hyp", hyps[1], "--ref", ref, "--json")
    assert code == 0, err
    assert json.loads(alone)["bleu"] == ours["systems"][1]["bleu"]["score"]
    assert json.loads(alone)["chrf"] == ours["systems"][1]["chrf"]["score"]


def test_files_of_different_lengths_are_one_line_and_nothing_is_scored(systems, tmp_path) -> None:
    ref, hyps = systems
    short = tmp_path / "short.en"
    short.write_text("one line\ntwo lines\n", encoding="utf-8")
    code, out, err = mt_eval("--hyp", hyps[0], "--hyp", short, "--ref", ref)
    assert code == 2 and out == ""
    assert err.strip() == f"error: {short} has 2 lines but {ref} has 300; they must pair up"
    code, out, err = mt_eval("--hyp", hyps[0], "--hyp", hyps[0], "--ref", ref)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "twice" in err
