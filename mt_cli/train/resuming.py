"""Whether ``mt train`` starts a run or continues it from ``last.pt``, decided the same on every rank.

``--resume`` must continue; no flag starts a new run; ``--resume auto`` continues when the run has
a ``last.pt`` and starts otherwise. Under torchrun ``auto`` is the default: torchrun restarts a
failed worker group with the same arguments (``--max-restarts``), and the restarted group must go
on from the last checkpoint, not be refused as a second fresh start into a run.

Each rank decides from its own view of the run directory before the process group exists (the
config it reads depends on the decision); once the group is joined, the ranks check that they all
saw the same ``last.pt`` and decided the same, so a run directory that is not on a filesystem
every node shares is refused on every rank instead of training two different runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mt_cli.disk.layout import RunDir
from mt_cli.errors import CheckpointError
from mt_cli.runtime.distributed import Distributed, under_torchrun

Asked = Literal["last", "auto"] | None  # `--resume`, `--resume auto`, no flag


@dataclass(frozen=True)
class Start:
    resume: bool  # continue from last.pt (with the run's saved config)
    auto: bool  # decided by `--resume auto`: a new start may follow an attempt that died early


def decide(asked: Asked, run_dir: Callable[[], Path]) -> Start:
    """How ``mt train`` starts in the run directory ``run_dir()`` (looked up only when ``auto``
    needs it); no flag means ``auto`` under torchrun."""
    if asked is None and under_torchrun():
        asked = "auto"
    if asked == "auto":
        return Start(resume=RunDir(run_dir()).last.exists(), auto=True)
    return Start(resume=asked == "last", auto=False)


def check_start(run: RunDir, start: Start) -> None:
    """Refuse a resume without ``last.pt``, and a new start into a run that trained before, which
    would mix its checkpoints and metrics with the old run's and replace best.pt.

    An automatic start may follow an attempt that wrote metrics but died before its first
    checkpoint (nothing to resume from, nothing to lose): its metrics.jsonl is appended to, and
    like a resumed run's it repeats the updates the new attempt trains again.
    """
    if start.resume and not run.last.exists():
        raise CheckpointError(f"cannot resume: {run.last} does not exist (start without --resume)")
    previous = run.previous_training()
    if start.auto and previous == [run.metrics]:
        return
    if not start.resume and previous:
        raise CheckpointError(
            f"{run.root} already holds a training run ({previous[0]}); continue it with "
            f"`mt train --run {run.root} --resume`, or train into another --run"
        )


def check_same_start(run: RunDir, start: Start, dist: Distributed) -> None:
    """Every rank of the group sees the same ``last.pt`` and starts the same way (rank 0 writes
    into the run directory, the others read what it wrote, so all must see one directory)."""
    if not dist.active:
        return
    seeing = dist.sum(int(run.last.exists()))
    if seeing not in (0, dist.world_size):
        raise CheckpointError(
            f"{seeing} of {dist.world_size} ranks see {run.last}: the run directory must be on a "
            "filesystem that every node shares (the same path on each)"
        )
    resuming = dist.sum(int(start.resume))
    if resuming not in (0, dist.world_size):
        raise CheckpointError(
            f"{resuming} of {dist.world_size} ranks resume from {run.last}: start every rank with the "
            "same --resume"
        )
