"""How `mt train` starts: --resume, --resume auto (the default under torchrun), no flag; every rank
the same way; a resume on another number of processes refused in one line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from helpers import FAST_TRAINING

from mt_cli.checkpoint import Checkpoint
from mt_cli.config.recipe import load_config
from mt_cli.disk.layout import RunDir
from mt_cli.errors import CheckpointError
from mt_cli.runtime.distributed import Distributed
from mt_cli.train.progress import capture_rng, ranks_rng, restore_rng
from mt_cli.train.resuming import Start, check_same_start, check_start, decide
from mt_cli.train.trainer import Trainer


@pytest.fixture
def outside_torchrun(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)


def with_files(root: Path, *names: str) -> RunDir:
    run = RunDir(root)
    for name in names:
        (run.root / name).parent.mkdir(parents=True, exist_ok=True)
        (run.root / name).write_bytes(b"")
    return run


def unused() -> Path:
    raise AssertionError("the run directory was looked up")


def test_no_flag_starts_and_resume_must_resume(outside_torchrun, tmp_path) -> None:
    with_files(tmp_path, "checkpoints/last.pt")
    assert decide(None, unused) == Start(resume=False, auto=False)
    assert decide("last", unused) == Start(resume=True, auto=False)


@pytest.mark.parametrize("saved", [True, False], ids=["last.pt", "none"])
def test_auto_resumes_where_last_pt_is(outside_torchrun, tmp_path, saved: bool) -> None:
    with_files(tmp_path, *(["checkpoints/last.pt"] if saved else []))
    assert decide("auto", lambda: tmp_path) == Start(resume=saved, auto=True)


@pytest.mark.parametrize("variable", [("TORCHELASTIC_RUN_ID", "none"), ("WORLD_SIZE", "2")])
def test_under_torchrun_no_flag_means_auto(monkeypatch, tmp_path, variable: tuple[str, str]) -> None:
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setenv(*variable)
    assert decide(None, lambda: tmp_path) == Start(resume=False, auto=True)
    with_files(tmp_path, "checkpoints/last.pt")
    assert decide(None, lambda: tmp_path) == Start(resume=True, auto=True)
    assert decide("last", unused) == Start(resume=True, auto=False)


def test_an_automatic_start_follows_an_attempt_that_died_before_its_first_checkpoint(tmp_path) -> None:
    run = with_files(tmp_path, "metrics.jsonl", "spm.de.model")
    check_start(run, Start(resume=False, auto=True))
    with pytest.raises(CheckpointError, match="already holds a training run .*metrics.jsonl.*--resume"):
        check_start(run, Start(resume=False, auto=False))


def test_an_automatic_start_never_replaces_checkpoints(tmp_path) -> None:
    run = with_files(tmp_path, "metrics.jsonl", "checkpoints/best.pt")  # last.pt deleted by hand
    with pytest.raises(CheckpointError, match="already holds a training run"):
        check_start(run, Start(resume=False, auto=True))
    with pytest.raises(CheckpointError, match=r"cannot resume: .*last\.pt does not exist"):
        check_start(run, Start(resume=True, auto=False))


@dataclass(frozen=True)
class Ranks(Distributed):
    """Rank 0 of a group whose other ranks each add ``others`` to a sum."""

    others: int = 0

    def sum(self, value: int) -> int:
        return value + self.others


def test_every_rank_must_see_the_same_last_pt(tmp_path) -> None:
    run = with_files(tmp_path, "checkpoints/last.pt")
    check_same_start(run, Start(True, True), Ranks(world_size=3, others=2))
    shared = r"^2 of 3 ranks see .*last\.pt: .* filesystem that every node shares"
    with pytest.raises(CheckpointError, match=shared):
        check_same_start(run, Start(True, True), Ranks(world_size=3, others=1))
    with pytest.raises(CheckpointError, match="^1 of 2 ranks resume from .*same --resume"):
        check_same_start(with_files(tmp_path / "new"), Start(True, False), Ranks(world_size=2))


def test_each_rank_gets_its_own_random_state_back() -> None:
    torch.manual_seed(1)
    first = capture_rng()
    torch.rand(5)
    second = capture_rng()
    saved = ranks_rng([first, second])
    restore_rng(saved, 1)
    assert torch.equal(torch.get_rng_state(), second["torch"])
    restore_rng(saved, 0)
    assert torch.equal(torch.get_rng_state(), first["torch"])
    restore_rng(first, 1)  # a last.pt of one process, or saved before mt kept every rank's
    assert torch.equal(torch.get_rng_state(), first["torch"])


def trainer(tiny_config_path: Path, tiny_corpus, run_dir: Path) -> Trainer:
    cfg = load_config(tiny_config_path, [*FAST_TRAINING, "train.max_steps=1"])
    run_dir.mkdir(parents=True, exist_ok=True)
    return Trainer(cfg, RunDir(run_dir), tiny_corpus.training_data(cfg), Distributed(), lambda line: None)


@pytest.mark.parametrize("world_size", [2, None], ids=["two-processes", "not-saved"])
def test_a_resume_on_another_number_of_processes(
    tiny_config_path, tiny_corpus, tmp_path, world_size: int | None
) -> None:
    first = trainer(tiny_config_path, tiny_corpus, tmp_path)
    first.progress.step = 1
    first.save_last()
    saved = Checkpoint.load(first.run.last)
    assert saved.progress is not None and saved.progress["world_size"] == 1
    saved.progress["world_size"] = world_size  # as two ranks saved it; None: an older last.pt
    saved.save(first.run.last)
    resumed = trainer(tiny_config_path, tiny_corpus, tmp_path)
    if world_size is None:  # what it was trained with is not known: resumed as before
        resumed.resume()
        assert resumed.progress.step == 1
        return
    refusal = r"^cannot resume .*last\.pt with 1 process\(es\): it was trained with 2; start 2 "
    with pytest.raises(CheckpointError, match=refusal):
        resumed.resume()
