"""Figures: the attention heatmap, `mt plot` training curves, and `mt translate --attention`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from mt_cli.cli import app
from mt_cli.tools.plots import piece_label, plot_attention, read_metrics

runner = CliRunner()
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the IHDR chunk, which must come first in a valid PNG."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, "not a PNG"
    assert data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def attention(n_tgt: int, n_src: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n_tgt, n_src, generator=torch.Generator().manual_seed(seed)).softmax(-1)


def pieces(n: int, words: list[str]) -> list[str]:
    return [("\u2581" if i % 3 == 0 else "") + words[i % len(words)] for i in range(n - 1)] + ["</s>"]


def test_heatmap_is_a_png_that_grows_with_the_sentences(tmp_path: Path) -> None:
    small, large = tmp_path / "small.png", tmp_path / "large.png"
    plot_attention(pieces(4, ["Der", "Hund", "läuft"]), pieces(3, ["The", "dog"]), attention(3, 4), small)
    plot_attention(
        pieces(20, ["Straße", "über", "Fußball"]), pieces(14, ["street"]), attention(14, 20), large
    )
    (w_small, h_small), (w_large, h_large) = png_size(small), png_size(large)
    assert w_large > w_small >= 300 and h_large > h_small >= 300
    assert not list(tmp_path.glob(".*.tmp"))  # written to a temporary name, then renamed


def test_heatmap_rejects_bad_weights(tmp_path: Path) -> None:
    src, tgt = ["\u2581Der", "\u2581Hund", "</s>"], ["\u2581The", "</s>"]
    good = attention(2, 3)
    with pytest.raises(ValueError, match="sum to 1"):
        plot_attention(src, tgt, good * 1.5, tmp_path / "a.png")
    with pytest.raises(ValueError, match="sum to 1"):
        plot_attention(src, tgt, torch.full((2, 3), float("nan")), tmp_path / "a.png")
    with pytest.raises(ValueError, match="shape"):
        plot_attention(src, tgt, good.T, tmp_path / "a.png")
    with pytest.raises(ValueError, match="shape"):
        plot_attention(src[:2], tgt, good, tmp_path / "a.png")
    assert not (tmp_path / "a.png").exists()
    plot_attention(src, tgt, good.to(torch.bfloat16), tmp_path / "a.png")  # bf16 rounding is tolerated


def test_piece_labels() -> None:
    assert piece_label("\u2581läuft") == "läuft"
    assert piece_label("uft") == "\u00b7uft"
    assert piece_label(".") == "."
    assert piece_label("\u2581") == "\u2423"
    assert piece_label("</s>") == "</s>"


def write_metrics(run: Path) -> None:
    run.mkdir(parents=True, exist_ok=True)
    events = [
        {
            "event": "train",
            "step": s,
            "loss": 6.0 - s / 50,
            "lr": s * 1e-5,
            "tokens_per_s": 1000.0 + s,
            "grad_norm": 1.0,
        }
        for s in range(10, 110, 10)
    ]
    events += [
        {"event": "val", "step": s, "loss": 5.0 - s / 100, "bleu": s / 10, "chrf": s / 5} for s in (50, 100)
    ]
    events.insert(6, {"event": "train", "step": 30, "loss": 9.0, "lr": 1e-4, "tokens_per_s": 5.0})  # a resume
    text = "".join(json.dumps(e) + "\n" for e in events) + '{"event": "train", "st'  # cut by a crash
    (run / "metrics.jsonl").write_text(text, encoding="utf-8")


def test_read_metrics_keeps_the_latest_event_per_step(tmp_path: Path) -> None:
    write_metrics(tmp_path / "run")
    train, val = read_metrics(tmp_path / "run")
    assert [e["step"] for e in train] == list(range(10, 110, 10))
    assert train[2]["loss"] == 9.0 and [e["step"] for e in val] == [50, 100]


def test_plot_command_writes_curves(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_metrics(run)
    result = runner.invoke(app, ["plot", str(run)])
    assert result.exit_code == 0, result.output
    assert png_size(run / "curves.png") > (800, 500)
    out = tmp_path / "curves-copy.png"
    result = runner.invoke(app, ["plot", "--run", str(run), "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert png_size(out) == png_size(run / "curves.png")
    missing = runner.invoke(app, ["plot", str(run), "--output", str(tmp_path / "figures" / "curves.png")])
    assert (
        missing.exit_code == 2 and "does not exist" in missing.stderr and not (tmp_path / "figures").exists()
    )


@pytest.mark.parametrize("content", [None, '{"event": "val", "step": 5, "loss": 4.0, "bleu": 1.0}\n'])
def test_plot_without_training_metrics_is_one_error_line(tmp_path: Path, content: str | None) -> None:
    if content is not None:
        (tmp_path / "metrics.jsonl").write_text(content, encoding="utf-8")
    result = runner.invoke(app, ["plot", str(tmp_path)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "metrics.jsonl" in lines[0], result.stderr
    assert not (tmp_path / "curves.png").exists()


def test_matplotlib_is_imported_only_for_figures() -> None:
    code = (
        "import sys, mt_cli.cli, mt_cli.decode.translator, mt_cli.tools.plots, mt_cli.tools.bench; "
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported at module level'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_translate_attention_writes_a_png(trained_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "attention.png"
    result = runner.invoke(
        app,
        [
            "translate",
            "Der Hund läuft über die Straße.",
            "--run",
            str(trained_run),
            "--beam",
            "1",
            "--attention",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip()
    width, height = png_size(out)
    assert width > 300 and height > 300
