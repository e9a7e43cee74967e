"""train/amp.py: ``train.amp: auto`` on a CPU trains its first updates in both precisions and
keeps the one measured faster; a fixed precision never changes."""

from __future__ import annotations

import torch

from mt_cli.runtime.distributed import Distributed
from mt_cli.train import amp
from mt_cli.train.amp import Precision

TRIAL = 2 * (amp.WARMUP + amp.TIMED)


def run_trial(
    seconds: dict[torch.dtype | None, float], warmup_seconds: float = 0.0
) -> tuple[Precision, list]:
    """A trial whose updates of 1,000 tokens take ``seconds[dtype]`` (the warm-up ones
    ``warmup_seconds``); the dtypes it ran, in order."""
    logged: list[str] = []
    precision = Precision(torch.bfloat16, True, Distributed(), logged.append)
    ran = []
    for update in range(TRIAL):
        dtype = precision.current()
        ran.append(dtype)
        took = warmup_seconds if update < 2 * amp.WARMUP else seconds[dtype]
        assert precision.record(took, 1000) == (update == TRIAL - 1)  # decided at the trial's last update
    assert len(logged) == 1
    return precision, ran


def test_a_fixed_precision_is_never_measured() -> None:
    for dtype in (None, torch.bfloat16):
        precision = Precision(dtype, False, Distributed(), lambda message: None)
        assert not any(precision.record(1.0, 1000) for _ in range(3 * TRIAL))
        assert precision.current() is dtype and precision.dtype is dtype


def test_the_trial_alternates_and_keeps_bf16_only_where_it_is_faster_by_the_margin() -> None:
    precision, ran = run_trial({torch.bfloat16: 0.5, None: 1.0})
    assert ran == [torch.bfloat16, None] * (TRIAL // 2)  # both precisions see the same mix of batches
    assert precision.dtype is torch.bfloat16 and not precision.deciding
    assert all(precision.current() is torch.bfloat16 for _ in range(3))
    for bf16, fp32 in ((1.0, 0.8), (1.0, 1.05)):  # slower, and faster by less than MARGIN
        precision, _ = run_trial({torch.bfloat16: bf16, None: fp32})
        assert precision.dtype is None and precision.current() is None


def test_the_warm_up_updates_are_not_timed() -> None:
    # A new shape's kernels are built in the first updates: a slow start must not decide.
    precision, _ = run_trial({torch.bfloat16: 0.5, None: 1.0}, warmup_seconds=100.0)
    assert precision.dtype is torch.bfloat16
