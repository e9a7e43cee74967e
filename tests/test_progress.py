"""Training metrics: metrics.jsonl and the TensorBoard event files carry the same scalars."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch
from helpers import CONFIGS, FAST_TRAINING

from mt_cli.config.recipe import load_config
from mt_cli.disk.layout import RunDir
from mt_cli.errors import ConfigError
from mt_cli.runtime.distributed import Distributed
from mt_cli.train.progress import TENSORBOARD_SCALARS, MetricsLog
from mt_cli.train.run import train
from mt_cli.train.trainer import Trainer


def scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag in the event files of ``directory``: [(step, value)], as TensorBoard reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(directory), size_guidance={"scalars": 0})  # 0: keep every point
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def logged(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """The same tags from metrics.jsonl: each plotted field that is there and finite."""
    found: dict[str, list[tuple[int, float]]] = {}
    for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for name in TENSORBOARD_SCALARS[record["event"]]:
            if name in record and math.isfinite(record[name]):
                found.setdefault(f"{record['event']}/{name}", []).append((record["step"], record[name]))
    return found


def test_tensorboard_has_each_scalar_at_the_steps_of_metrics_jsonl(
    tiny_config_path, tiny_corpus, tmp_path
) -> None:
    overrides = ["train.max_steps=6", "train.validate_every_steps=3", "train.val_bleu=true"]
    capped = ["decode.max_len_a=0.5", "decode.max_len_b=5"]  # an untrained model rarely ends a line
    cfg = load_config(tiny_config_path, [*FAST_TRAINING, *overrides, *capped, "train.tensorboard=true"])
    run = RunDir(tmp_path)
    torch.manual_seed(cfg.train.seed)
    trainer = Trainer(cfg, run, tiny_corpus.training_data(cfg), Distributed(), log=lambda message: None)
    try:
        trainer.fit()
    finally:
        trainer.metrics.close()

    plotted, expected = scalars(run.tensorboard), logged(tmp_path)
    train_tags = {f"train/{name}" for name in TENSORBOARD_SCALARS["train"]}
    assert set(plotted) == set(expected) == train_tags | {"val/loss", "val/bleu", "val/chrf"}
    for tag, points in expected.items():
        steps = [1, 2, 3, 4, 5, 6] if tag.startswith("train/") else [3, 6]
        assert [step for step, _ in plotted[tag]] == [step for step, _ in points] == steps, tag
        assert [value for _, value in plotted[tag]] == pytest.approx(  # float32 in the event file
            [value for _, value in points], rel=1e-6, abs=1e-12
        ), tag
    assert all(0 <= value <= 100 for _, value in plotted["val/bleu"] + plotted["val/chrf"])


def test_a_resumed_log_hides_what_the_interrupted_run_logged_after_last_pt(tmp_path) -> None:
    board = tmp_path / "tensorboard"
    interrupted = MetricsLog(tmp_path / "metrics.jsonl", tensorboard=board)
    for step in (1, 2, 3):
        interrupted.write("train", step=step, loss=10.0 + step)
    interrupted.close()
    resumed = MetricsLog(tmp_path / "metrics.jsonl", tensorboard=board)  # last.pt was saved at step 1
    for step in (2, 3, 4):
        resumed.write("train", step=step, loss=20.0 + step)
    resumed.close()
    assert scalars(board) == {"train/loss": [(1, 11.0), (2, 22.0), (3, 23.0), (4, 24.0)]}


def test_tensorboard_without_the_package_stops_before_any_work(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in ("tensorboard", "torch.utils.tensorboard"):
        monkeypatch.setitem(sys.modules, module, None)  # None in sys.modules: the import fails
    run_dir = tmp_path / "run"
    cfg = load_config(CONFIGS / "tiny.yaml", ["train.tensorboard=true", f"run_dir={run_dir}"])
    with pytest.raises(ConfigError, match=r'pip install -e "\.\[tensorboard\]"') as raised:
        train(cfg, run_dir, resume=False, log=lambda message: None)
    assert "\n" not in str(raised.value)
    assert not run_dir.exists()  # no tokenizers trained, nothing written
