"""The training loop: learning, determinism, exact resume, safe checkpoints, signals, DDP."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import CONFIGS, FAST_TRAINING, torchrun_train
from typer.testing import CliRunner

from mt_cli.checkpoint import Checkpoint
from mt_cli.cli import app
from mt_cli.config.card import ModelCard
from mt_cli.config.options import TranslateOptions
from mt_cli.config.recipe import load_config
from mt_cli.config.sections import Config
from mt_cli.data.batch import source_ids, target_ids
from mt_cli.decode.evaluate import evaluate_run
from mt_cli.decode.translator import Translator
from mt_cli.disk.layout import RunDir
from mt_cli.errors import CheckpointError, TrainingError
from mt_cli.model.loss import token_loss
from mt_cli.runtime.distributed import Distributed
from mt_cli.train import amp
from mt_cli.train.optim import learning_rate
from mt_cli.train.run import train
from mt_cli.train.trainer import Trainer
from mt_cli.trained import load_trained

SPECIALS = (("src", source_ids), ("tgt", target_ids))


def make_trainer(tiny_config_path: Path, tiny_corpus, run_dir: Path, *overrides: str) -> Trainer:
    """A trainer for the tiny recipe with ``overrides``, its data built for that config."""
    cfg = load_config(tiny_config_path, [*FAST_TRAINING, *overrides])
    run = RunDir(run_dir)
    run.root.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.train.seed)
    data = tiny_corpus.training_data(cfg)
    return Trainer(cfg, run, data, Distributed(), log=lambda message: None)


def train_losses(run_dir: Path) -> list[float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["loss"] for line in lines if '"train"' in line]


def test_loss_decreases(tiny_config_path, tiny_corpus, tmp_path) -> None:
    trainer = make_trainer(tiny_config_path, tiny_corpus, tmp_path, "train.max_steps=40")
    trainer.fit()
    losses = train_losses(tmp_path)
    assert len(losses) == 40
    logged = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all(
        0 < e["mfu"] < 1 and e["tflops"] > 0 and e["data_wait_s"] >= 0
        for e in logged
        if e["event"] == "train"
    )
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5


def test_rdrop_adds_the_two_passes_divergence_and_still_learns(
    tiny_config_path, tiny_corpus, tmp_path
) -> None:
    trainer = make_trainer(tiny_config_path, tiny_corpus, tmp_path, "train.rdrop=5", "model.dropout=0.3")
    batch = next(iter(trainer.epoch_updates()))[0]
    assert trainer.batch_loss(batch)[1].item() > 0  # two dropout draws predict differently
    trainer.model.eval()  # no dropout: the passes agree
    assert trainer.batch_loss(batch)[1].item() == pytest.approx(0.0, abs=1e-3)
    trainer.model.train()
    trainer.cfg = load_config(tiny_config_path, [*FAST_TRAINING, "train.rdrop=5", "train.max_steps=40"])
    trainer.fit()
    losses = train_losses(tmp_path)
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5


def test_time_bound_decay_reaches_zero_when_the_budget_ends(tiny_config_path, tiny_corpus, tmp_path) -> None:
    trainer = make_trainer(
        tiny_config_path,
        tiny_corpus,
        tmp_path,
        "train.schedule=cosine",
        "train.lr_horizon=max_minutes",
        "train.max_minutes=0.1",
        "train.max_steps=0",
        "train.max_epochs=1000",
        "train.warmup_steps=5",
    )
    progress = trainer.fit()
    tc = trainer.cfg.train
    assert progress.step > 20 and trainer.budget_used() >= 6.0  # the hour (here 6 s) ended it
    assert learning_rate(progress.step, tc, trainer.cfg.model.d_model, trainer.budget_used()) == 0.0
    logged = [
        json.loads(line)["lr"]
        for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
        if '"train"' in line
    ]
    assert max(logged) == pytest.approx(tc.lr, rel=0.05)  # warmup reached the peak
    assert logged[-1] < 0.05 * tc.lr  # and the last updates ran at almost zero


def test_same_seed_same_curve(tiny_config_path, tiny_corpus, tmp_path) -> None:
    for name in ("a", "b"):
        make_trainer(tiny_config_path, tiny_corpus, tmp_path / name, "train.max_steps=8").fit()
    assert train_losses(tmp_path / "a") == train_losses(tmp_path / "b")
    make_trainer(tiny_config_path, tiny_corpus, tmp_path / "c", "train.max_steps=8", "train.seed=2").fit()
    assert train_losses(tmp_path / "c") != train_losses(tmp_path / "a")


@pytest.mark.parametrize("accum", [1, 2])
def test_resume_is_exact(tiny_config_path, tiny_corpus, tmp_path, accum: int) -> None:
    n = 6
    extra = [f"train.accum_steps={accum}", "train.validate_every_steps=4"]
    make_trainer(tiny_config_path, tiny_corpus, tmp_path / "split", f"train.max_steps={n}", *extra).fit()
    resumed = make_trainer(
        tiny_config_path, tiny_corpus, tmp_path / "split", f"train.max_steps={2 * n}", *extra
    )
    resumed.resume()
    assert resumed.progress.step == n
    resumed.fit()
    whole = make_trainer(
        tiny_config_path, tiny_corpus, tmp_path / "whole", f"train.max_steps={2 * n}", *extra
    )
    whole.fit()
    assert resumed.progress.step == whole.progress.step == 2 * n
    for (name, a), b in zip(resumed.model.state_dict().items(), whole.model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=name)


@pytest.mark.parametrize("bpe_dropout", [0.0, 0.1])
def test_resume_across_an_epoch_boundary(tiny_config_path, tiny_corpus, tmp_path, bpe_dropout: float) -> None:
    extra = f"tokenizer.tgt_bpe_dropout={bpe_dropout}"
    probe = make_trainer(tiny_config_path, tiny_corpus, tmp_path / "probe", extra)
    per_epoch = sum(1 for _ in probe.loader.batches(0))
    stop, total = per_epoch - 2, per_epoch + 3
    make_trainer(tiny_config_path, tiny_corpus, tmp_path / "split", f"train.max_steps={stop}", extra).fit()
    resumed = make_trainer(
        tiny_config_path, tiny_corpus, tmp_path / "split", f"train.max_steps={total}", extra
    )
    resumed.resume()
    resumed.fit()
    whole = make_trainer(tiny_config_path, tiny_corpus, tmp_path / "whole", f"train.max_steps={total}", extra)
    whole.fit()
    assert resumed.progress.epoch == whole.progress.epoch == 1
    for a, b in zip(resumed.model.parameters(), whole.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_truncated_checkpoint_is_reported(tiny_config_path, tiny_corpus, tmp_path) -> None:
    trainer = make_trainer(tiny_config_path, tiny_corpus, tmp_path, "train.max_steps=2")
    trainer.fit()
    data = trainer.run.last.read_bytes()
    trainer.run.last.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="damaged or truncated"):
        Checkpoint.load(trainer.run.last)
    with pytest.raises(CheckpointError, match="does not exist"):
        Checkpoint.load(tmp_path / "nothing.pt")


def test_interrupted_save_keeps_the_previous_file(tmp_path, monkeypatch) -> None:
    path = tmp_path / "last.pt"
    card = ModelCard.of(Config())
    Checkpoint({"w": torch.ones(3)}, card).save(path)

    def dies_halfway(obj, handle):
        handle.write(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        Checkpoint({"w": torch.zeros(3)}, card).save(path)
    torch.testing.assert_close(Checkpoint.load(path).model["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary left behind


@pytest.mark.parametrize("lag_reads", [False, True])
def test_non_finite_loss_is_never_applied(
    tiny_config_path, tiny_corpus, tmp_path, monkeypatch, lag_reads
) -> None:
    trainer = make_trainer(tiny_config_path, tiny_corpus, tmp_path, "train.max_bad_steps=3")
    trainer.lag_reads = lag_reads  # CUDA's way: the skips are counted one update late
    before = [p.detach().clone() for p in trainer.model.parameters()]
    monkeypatch.setattr("mt_cli.train.trainer.token_loss", lambda logits, *rest: logits.sum() * math.nan)
    with pytest.raises(TrainingError, match="not finite for 3 updates in a row"):
        trainer.fit()
    assert trainer.progress.step == 0 and trainer.progress.skipped_steps == 3
    for a, b in zip(before, trainer.model.parameters()):
        assert torch.equal(a, b)


def test_reading_outcomes_one_update_late_trains_the_same(tiny_config_path, tiny_corpus, tmp_path) -> None:
    """CUDA's way of reading an update's loss and norm (after the next update is queued) against
    the CPU's (at once), both on the CPU: the same updates, metrics and weights."""
    extra = (
        "train.max_steps=9",
        "train.log_every_steps=2",
        "train.validate_every_steps=5",
        "train.accum_steps=2",
    )
    trainers, read_late = {}, {}
    for lag in (False, True):
        trainer = make_trainer(tiny_config_path, tiny_corpus, tmp_path / str(lag), *extra)
        trainer.lag_reads = lag
        read_late[lag] = []
        queue = trainer.update

        def spy(batches, queue=queue, trainer=trainer, late=read_late[lag]) -> None:
            late.append(trainer.pending is not None)  # the previous update not read yet
            queue(batches)

        trainer.update = spy
        trainer.fit()
        trainers[lag] = trainer
    assert sum(read_late[True]) == 3 and not any(read_late[False])  # updates 1, 3 and 7 decide nothing

    def logged(run: Path) -> list[tuple]:
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        return [
            (r["event"], r["step"], r["loss"], r.get("grad_norm"), r.get("lr"), r.get("bleu")) for r in rows
        ]

    assert logged(tmp_path / "True") == logged(tmp_path / "False")
    assert [r[1] for r in logged(tmp_path / "True") if r[0] == "train"] == [2, 4, 6, 8]
    for name, weights in trainers[True].model.state_dict().items():
        assert torch.equal(weights, trainers[False].model.state_dict()[name]), name


def test_validation_loss_is_unsmoothed_nll(tiny_config_path, tiny_corpus, tmp_path) -> None:
    trainer = make_trainer(tiny_config_path, tiny_corpus, tmp_path)
    model = trainer.model.eval()
    v = trainer.validator
    total = tokens = 0.0
    with torch.no_grad():
        for i in range(len(v.val_pairs)):
            batch = v.val_pairs.collate([i]).to(trainer.device)
            total += float(
                token_loss(model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask), batch.tgt_out, 0.0)
            )
            tokens += batch.tgt_tokens
    assert v.loss(model) == pytest.approx(total / tokens, rel=1e-4)


def run_mt(*args: str, env: dict | None = None, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mt_cli", *args],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_config_errors_exit_2_before_any_work(tmp_path) -> None:
    result = run_mt("train", "--config", "tiny", "--run", str(tmp_path / "run"), "--set", "train.lrr=1")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "did you mean train.lr" in result.stderr
    assert not (tmp_path / "run").exists()


def test_emulated_bf16_is_refused_before_any_work(tmp_path, monkeypatch) -> None:
    # Any CPU can pretend to lack bf16; the refusal must come before the corpus is even read.
    monkeypatch.setattr("mt_cli.runtime.device.cpu_has_native_bf16", lambda: False)
    monkeypatch.setattr("mt_cli.train.run.load_eval_splits", lambda *args: pytest.fail("read the corpus"))
    args = [
        "train",
        "--config",
        "tiny",
        "--run",
        str(tmp_path / "run"),
        "--device",
        "cpu",
        "--set",
        "train.amp=bf16",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and "no native bf16" in result.stderr
    assert not (tmp_path / "run").exists()


def test_a_second_fresh_start_in_a_run_directory_is_refused(tiny_config_path, tiny_corpus, tmp_path) -> None:
    make_trainer(tiny_config_path, tiny_corpus, tmp_path / "run", "train.max_steps=2").fit()
    last = tmp_path / "run" / "checkpoints" / "last.pt"
    before = last.read_bytes()
    result = run_mt("train", "--config", "tiny", "--run", str(tmp_path / "run"))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "already holds a training run" in result.stderr
    assert "--resume" in result.stderr
    assert last.read_bytes() == before


def test_sigint_saves_a_resumable_checkpoint(tmp_path, data_dir, spawn) -> None:
    # With a loader process and BPE-dropout: Ctrl-C reaches the worker too, and must cost nothing.
    run_dir = tmp_path / "run"
    args = [
        "train",
        "--config",
        "tiny",
        "--run",
        str(run_dir),
        "--set",
        "train.save_every_steps=100000",
        "--set",
        "train.log_every_steps=1",
        "--set",
        "train.max_epochs=50",
        "--set",
        "data.workers=1",
        "--set",
        "tokenizer.src_bpe_dropout=0.1",
    ]
    proc = spawn(
        [sys.executable, "-m", "mt_cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    deadline = time.time() + 180
    while time.time() < deadline and not (run_dir / "metrics.jsonl").exists():
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "--resume" in err and "Traceback" not in err
    progress = Checkpoint.load(run_dir / "checkpoints" / "last.pt").progress
    assert progress is not None
    assert progress["step"] > 0  # a mid-epoch stop keeps its batch position, an epoch-end one moves on
    assert progress["batch_in_epoch"] > 0 or progress["epoch"] > 0


@pytest.mark.parametrize(
    "loading", [[], ["data.workers=1", "tokenizer.tgt_bpe_dropout=0.1"]], ids=["fixed", "dropout-in-a-worker"]
)
def test_two_process_gloo_ddp_trains(tmp_path, data_dir, loading: list[str]) -> None:
    run_dir = tmp_path / "ddp"
    overrides = [*FAST_TRAINING, *loading, "train.max_steps=6", "train.device=cpu"]
    cmd = torchrun_train(["--nproc_per_node=2", "--master_port=29533"], run_dir, overrides)
    result = subprocess.run(
        cmd, capture_output=True, text=True, timeout=300, cwd="/", env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    assert result.returncode == 0, result.stderr[-2000:]
    progress = Checkpoint.load(run_dir / "checkpoints" / "last.pt").progress
    assert progress is not None and progress["step"] == 6
    assert (run_dir / "checkpoints" / "best.pt").exists()
    # Rank 0 wrote one prepared corpus; rank 1 waited and mapped the same files.
    assert len(list((run_dir / "prepared").iterdir())) == 1
    assert result.stderr.count("encoding the training pairs") == 1


@pytest.mark.slow
def test_compiled_training_checkpoints_load_without_compile(tiny_config_path, tiny_corpus, tmp_path) -> None:
    trainer = make_trainer(tiny_config_path, tiny_corpus, tmp_path, "train.max_steps=3", "train.compile=true")
    trainer.fit()
    weights = Checkpoint.load(trainer.run.last).model
    assert not any(key.startswith("_orig_mod.") for key in weights)
    fresh = make_trainer(tiny_config_path, tiny_corpus, tmp_path / "fresh")
    fresh.model.load_state_dict(weights)


@pytest.mark.slow
def test_compiled_training_follows_the_eager_loss_curve(tiny_config_path, tiny_corpus, tmp_path) -> None:
    # fp32 and no dropout of any kind: compiled kernels may fuse and reorder sums, nothing else.
    same = ["train.max_steps=12", "model.dropout=0", "model.src_token_dropout=0", "model.tgt_token_dropout=0"]
    for name, compiled in (("eager", "false"), ("compiled", "true")):
        make_trainer(tiny_config_path, tiny_corpus, tmp_path / name, *same, f"train.compile={compiled}").fit()
    eager, compiled = train_losses(tmp_path / "eager"), train_losses(tmp_path / "compiled")
    assert len(eager) == len(compiled) == 12 and eager[-1] < eager[0] - 0.3
    assert compiled == pytest.approx(eager, rel=1e-4)


def test_closing_test_scores_equal_mt_eval_of_the_same_checkpoint(data_dir, tmp_path) -> None:
    # The numbers `mt train` writes must be the ones `mt eval` reproduces from best.pt. Training
    # runs in fp32 here; on a CPU with native bf16, `mt eval` decodes in bf16 with weights cast
    # once, so this fails if the closing scores follow the training precision or use autocast.
    run_dir = tmp_path / "run"
    overrides = ["data.train_limit=1500", "train.max_epochs=2", "train.amp=off", f"run_dir={run_dir}"]
    overrides.append("train.val_bleu=false")  # best.pt by the loss: the closing scores are what is compared
    cfg = load_config(CONFIGS / "tiny.yaml", overrides)
    report = train(cfg, run_dir, resume=False, log=lambda message: None)
    for beam, name in ((1, "greedy"), (cfg.decode.beam_size, f"beam{cfg.decode.beam_size}")):
        engine = Translator.of(load_trained(run_dir, None), "auto")
        evaluation = evaluate_run(
            engine, cfg.data.test_split, None, None, TranslateOptions(beam=beam)
        ).evaluation
        assert evaluation.scores.bleu == report["scores"][name]["bleu"], name
        assert evaluation.scores.chrf == report["scores"][name]["chrf"], name


def test_amp_auto_on_a_cpu_with_bf16_trains_in_both_then_in_the_faster(
    tiny_config_path, tiny_corpus, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr("mt_cli.runtime.device.cpu_has_native_bf16", lambda: True)
    trial = 2 * (amp.WARMUP + amp.TIMED)
    cfg = load_config(tiny_config_path, [*FAST_TRAINING, "train.amp=auto", f"train.max_steps={trial + 2}"])
    logged: list[str] = []
    data = tiny_corpus.training_data(cfg)
    (tmp_path / "run").mkdir()
    trainer = Trainer(cfg, RunDir(tmp_path / "run"), data, Distributed(), log=logged.append)
    assert trainer.precision.deciding and trainer.validator.dtype is None  # validates as `mt eval` does
    ran = []
    update = trainer.update
    monkeypatch.setattr(
        trainer, "update", lambda batches: (ran.append(trainer.precision.current()), update(batches))[1]
    )
    trainer.fit()
    assert ran[:trial] == [torch.bfloat16, None] * (trial // 2)
    assert ran[trial:] == [trainer.precision.dtype] * 2 and not trainer.precision.deciding
    assert sum("tokens/s in bf16" in line for line in logged) == 1
