"""`mt score`: forced decoding of given translations. Its corpus mean per-token NLL is the
validation loss training logs; mt and CTranslate2 agree per line; the inputs (two files, a TSV,
stdin), buffers and output formats give the same numbers; bad input is one line, nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import CONFIGS
from typer.testing import CliRunner

from mt_cli.cli import app
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K

runner = CliRunner()


def score(run: Path, *args: str, stdin: str | None = None) -> list[str]:
    result = runner.invoke(app, ["score", "--run", str(run), "--compute-type", "float32", *args], input=stdin)
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def score_json(run: Path, *args: str) -> list[dict]:
    return [json.loads(line) for line in score(run, "--json", *args)]


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_mean_nll_of_the_val_references_is_the_logged_val_loss(trained_run: Path, tmp_path: Path) -> None:
    """A one-epoch run in fp32 with label smoothing 0 (tokenizers reused from the trained run):
    `mt score` of every val pair, with the checkpoint of that validation, gives the loss in
    metrics.jsonl (the same pairs, cut the same way, one NLL per real target token)."""
    from mt_cli.config.recipe import load_config
    from mt_cli.data.prepare import load_eval_splits
    from mt_cli.disk.layout import RunDir
    from mt_cli.train.run import train

    run = tmp_path / "run"
    run.mkdir()
    for name in ("spm.de.model", "spm.de.json", "spm.en.model", "spm.en.json"):
        shutil.copy(trained_run / name, run / name)
    overrides = [
        "data.train_limit=1500",  # the trained run's: its tokenizers are reused, not retrained
        "train.max_epochs=1",
        "train.amp=off",
        "train.label_smoothing=0",
        "train.val_bleu=false",
        "train.test_at_end=false",
        f"run_dir={run}",
    ]
    cfg = load_config(CONFIGS / "tiny.yaml", overrides)
    train(cfg, run, resume=False, log=lambda message: None)
    events = [json.loads(line) for line in RunDir(run).metrics.read_text().splitlines()]
    logged = [e for e in events if e["event"] == "val"][-1]
    checkpoint = RunDir(run).step_checkpoint(logged["step"])
    val = load_eval_splits(cfg, lambda message: None)["val"]
    sources, targets = write(tmp_path / "val.de", val["src"]), write(tmp_path / "val.en", val["tgt"])
    records = score_json(run, "--checkpoint", str(checkpoint), "--src", str(sources), "--tgt", str(targets))
    assert len(records) == len(val["src"]) == 1014
    nll = -sum(r["log_prob"] for r in records) / sum(r["tokens"] for r in records)
    assert nll == pytest.approx(logged["loss"], rel=1e-4)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    sources = read_lines(SHIPPED_MULTI30K / "val.de.gz")[:150]
    targets = read_lines(SHIPPED_MULTI30K / "val.en.gz")[:150]
    folder = tmp_path_factory.mktemp("pairs")
    # An empty target (EOS alone), an empty source, a target past the model's positions.
    sources, targets = [*sources, "Ein Hund.", "", "Ein Hund."], [*targets, "", "A dog.", "dog " * 80]
    return write(folder / "src.de", sources), write(folder / "tgt.en", targets)


def test_mt_and_ctranslate2_scores_agree_per_line(trained_run: Path, pairs: tuple[Path, Path]) -> None:
    files = ["--src", str(pairs[0]), "--tgt", str(pairs[1]), "--per-token"]
    ours = score_json(trained_run, *files)
    theirs = score_json(trained_run, *files, "--engine", "ctranslate2")
    assert len(ours) == len(theirs) == 153
    for mine, other in zip(ours, theirs):
        assert mine["tokens"] == other["tokens"] == len(mine["per_token"])
        assert [p for p, _ in mine["per_token"]] == [p for p, _ in other["per_token"]]
        assert mine["log_prob"] == pytest.approx(other["log_prob"], abs=1e-3)
    assert ours[-3]["tokens"] == 1 and ours[-3]["per_token"][0][0] == "</s>"
    assert ours[-1]["tokens"] == 63  # cut so that BOS, the pieces and EOS fit 64 positions


def test_every_input_and_format_gives_the_same_numbers(
    trained_run: Path, pairs: tuple[Path, Path], tmp_path: Path
) -> None:
    files = ["--src", str(pairs[0]), "--tgt", str(pairs[1])]
    records = score_json(trained_run, *files)
    text = score(trained_run, *files)
    assert [line.split("\t") for line in text] == [
        [f"{r['log_prob']:.4f}", f"{r['mean_log_prob']:.4f}"] for r in records
    ]
    tsv = write(
        tmp_path / "pairs.tsv", [f"{s}\t{t}" for s, t in zip(read_lines(pairs[0]), read_lines(pairs[1]))]
    )
    assert score(trained_run, "-i", str(tsv)) == text
    assert score(trained_run, stdin=tsv.read_text(encoding="utf-8")) == text
    rebatched = score_json(trained_run, *files, "--buffer-size", "7")  # other batches: the last bits move
    assert [r["log_prob"] for r in rebatched] == pytest.approx([r["log_prob"] for r in records], abs=1e-4)
    output = tmp_path / "scores.txt"
    assert score(trained_run, *files, "-o", str(output)) == []
    assert read_lines(output) == text
    ensembled = score_json(trained_run, *files, "--ensemble", str(trained_run))
    assert [r["log_prob"] for r in ensembled] == pytest.approx([r["log_prob"] for r in records], abs=1e-4)
    per_token = score(trained_run, *files, "--per-token")[0].split("\t")
    pieces = [item.rsplit(":", 1) for item in per_token[2].split(" ")]
    assert pieces[-1][0] == "</s>" and sum(float(v) for _, v in pieces) == pytest.approx(
        float(per_token[0]), abs=1e-3
    )


def test_bad_input_is_one_line_exit_2_and_nothing_written(
    trained_run: Path, pairs: tuple[Path, Path], tmp_path: Path
) -> None:
    short = write(tmp_path / "short.en", read_lines(pairs[1])[:100])
    tsv = write(tmp_path / "bad.tsv", ["Ein Hund.\tA dog.", "no tab here"])
    out = tmp_path / "out.txt"
    cases = [
        (
            ["--src", str(pairs[0]), "--tgt", str(short)],
            f"--src {pairs[0]} has 153 lines but --tgt {short} has 100",
        ),
        (["--src", str(pairs[0])], "--src and --tgt go together"),
        (["-i", str(tsv)], "line 2 has 1 tab-separated fields"),
        (
            ["-i", str(tsv), "--engine", "ctranslate2", "--ensemble", str(trained_run)],
            "CTranslate2 has no ensembles",
        ),
        (["-i", str(tsv), "--compute-type", "float16", "--device", "cpu"], "float16 needs a CUDA GPU"),
    ]
    for args, message in cases:
        result = runner.invoke(app, ["score", "--run", str(trained_run), "-o", str(out), *args])
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 2, (args, result.output)
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], (args, lines)
        assert not out.exists(), args
