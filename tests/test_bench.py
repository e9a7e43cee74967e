"""`mt bench` and its textbook baseline: same function as ours given our weights, and a smoke run."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch
from helpers import greedy_tokens
from typer.testing import CliRunner

from mt_cli.cli import app
from mt_cli.config.sections import ModelConfig
from mt_cli.data.batch import collate, pad_sources
from mt_cli.decode.hypotheses import max_output_lengths
from mt_cli.model.transformer import build_model
from mt_cli.specials import BOS_ID, EOS_ID
from mt_cli.tools.textbook import TextbookTransformer, naive_greedy_batch, textbook_from

SRC_VOCAB, TGT_VOCAB = 50, 40


def config(**changes) -> ModelConfig:
    base = dict(
        d_model=32,
        n_heads=4,
        d_ff=64,
        encoder_layers=2,
        decoder_layers=3,
        dropout=0.1,
        attention_dropout=0.1,
        activation_dropout=0.1,
        max_positions=64,
    )
    return ModelConfig(**{**base, **changes})


def batch(seed: int = 1, vocab: tuple[int, int] = (SRC_VOCAB, TGT_VOCAB)):
    g = torch.Generator().manual_seed(seed)
    src = [torch.randint(4, vocab[0], (n,), generator=g).tolist() + [EOS_ID] for n in (3, 9, 12, 1, 6)]
    tgt = [
        [BOS_ID, *torch.randint(4, vocab[1], (n,), generator=g).tolist(), EOS_ID] for n in (7, 1, 10, 4, 12)
    ]
    return collate(src, tgt)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"norm_first": True},
        {"activation": "gelu"},
        {"tie_output": False},
        {"share_embeddings": True, "norm_first": True},
    ],
)
def test_textbook_given_our_weights_computes_our_logits(changes: dict) -> None:
    cfg = config(**changes)
    vocab = (TGT_VOCAB, TGT_VOCAB) if cfg.share_embeddings else (SRC_VOCAB, TGT_VOCAB)
    torch.manual_seed(0)
    ours = build_model(cfg, *vocab).eval()
    theirs = textbook_from(ours, cfg).eval()
    b = batch(vocab=vocab)
    real = b.tgt_out != 0  # pad query rows are never used
    expected = ours(b.src, b.tgt_in, b.src_mask, b.tgt_mask)
    torch.testing.assert_close(theirs(b.src, b.tgt_in)[real], expected[real], atol=1e-5, rtol=1e-5)
    with torch.no_grad():  # nn.Transformer's inference fast path (nested tensors, fused layers)
        torch.testing.assert_close(theirs(b.src, b.tgt_in)[real], expected[real], atol=1e-5, rtol=1e-5)
    # The comparison can fail: one weight off, or the textbook's own init, gives other logits.
    with torch.no_grad():
        theirs.transformer.decoder.layers[-1].linear2.bias[0] += 0.1
    assert not torch.allclose(theirs(b.src, b.tgt_in)[real], expected[real], atol=1e-3)
    fresh = TextbookTransformer(cfg, *vocab).eval()
    assert not torch.allclose(fresh(b.src, b.tgt_in)[real], expected[real], atol=1e-3)


def test_textbook_dropout_rates_and_training_mode() -> None:
    cfg = config(dropout=0.3, attention_dropout=0.2, activation_dropout=0.1)
    theirs = TextbookTransformer(cfg, SRC_VOCAB, TGT_VOCAB)
    layer = theirs.transformer.decoder.layers[0]
    assert (layer.dropout1.p, layer.dropout.p, layer.self_attn.dropout, layer.multihead_attn.dropout) == (
        0.3,
        0.1,
        0.2,
        0.2,
    )
    assert theirs.transformer.encoder.norm is None  # post-norm: no extra final LayerNorm, like ours
    cfg = config(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    torch.manual_seed(0)
    ours = build_model(cfg, SRC_VOCAB, TGT_VOCAB).train()
    theirs = textbook_from(ours, cfg).train()
    b = batch(seed=2)
    real = b.tgt_out != 0
    torch.testing.assert_close(
        theirs(b.src, b.tgt_in)[real],
        ours(b.src, b.tgt_in, b.src_mask, b.tgt_mask)[real],
        atol=1e-5,
        rtol=1e-5,
    )


def test_naive_loop_on_the_textbook_model_equals_our_cached_greedy() -> None:
    cfg = config(dropout=0.0)
    torch.manual_seed(3)
    ours = build_model(cfg, SRC_VOCAB, TGT_VOCAB).eval()
    theirs = textbook_from(ours, cfg).eval()
    g = torch.Generator().manual_seed(4)
    sources = [
        torch.randint(4, SRC_VOCAB, (n,), generator=g).tolist() + [EOS_ID] for n in (5, 1, 11, 8, 2, 9)
    ]
    src, src_mask = pad_sources(sources)
    cached = greedy_tokens(ours, src, src_mask, 1.5, 4)
    assert cached == naive_greedy_batch(theirs, src, max_output_lengths(ours, src_mask, 1.5, 4))
    assert len({len(c) for c in cached}) > 1  # some stop early, some at the limit


def test_bench_command_on_the_tiny_recipe(data_dir: Path, tiny_config_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    args = [
        "bench",
        "--config",
        str(tiny_config_path),
        "--sentences",
        "24",
        "--repeats",
        "2",
        "--decode-repeats",
        "1",
        "--batches",
        "2",
        "--beam",
        "3",
        "--device",
        "cpu",
        "--output",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    printed = result.stdout.splitlines()
    header = next(i for i, line in enumerate(printed) if line.startswith("task"))
    table = [line.split() for line in printed[header + 1 : header + 1 + len(report["rows"])]]
    assert len(table) == len(report["rows"])
    for row, cells in zip(report["rows"], table):
        assert cells[0] == row["task"] and float(cells[-5]) == pytest.approx(row["median_s"], abs=5e-4)
    assert any(line.startswith("greedy: naive nn.Transformer / ours time") for line in printed)
    assert "training:" in result.stderr and "training:" not in result.stdout  # progress on stderr
    rows = report["rows"]
    assert [r["task"] for r in rows].count("translate") == 3 and [r["task"] for r in rows].count("train") in (
        2,
        4,
    )
    for row in rows:
        assert len(row["seconds"]) == (2 if row["task"] == "train" else 1)
        for key in ("median_s", "tokens_per_s"):
            assert math.isfinite(row[key]) and row[key] > 0, (row, key)
        if row["task"] == "translate":
            assert row["sentences"] == 24 and row["sentences_per_s"] > 0
            assert row["mfu"] is None
        else:  # the same batches, so the same model FLOPs per second relative to tokens per second
            assert 0 < row["mfu"] < 1 and row["tflops"] > 0
            assert row["tflops"] / row["tokens_per_s"] == pytest.approx(
                rows[0]["tflops"] / rows[0]["tokens_per_s"]
            )
        if sys.platform == "linux":
            assert math.isfinite(row["peak_mib"]) and row["peak_mib"] > 0, row
    assert report["ratios"] and all(math.isfinite(v) and v > 0 for v in report["ratios"].values())
    assert 0.5 <= report["naive_matches_greedy"] <= 1.0
    assert "nn.Transformer naive greedy" in result.stdout and "ours beam3" in result.stdout
    assert "TFLOP/s (measured matmul peak)" in result.stdout
