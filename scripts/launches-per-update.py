# Kernel launches and time per training update of a recipe, on the device train.device picks
# (scripts/gpu-check.sh; RUN holds the recipe's tokenizers, e.g. a run it trained):
#   python scripts/launches-per-update.py CONFIG RUN OUT.json [key=value ...]
"""Warms up on WARMUP updates, times TIMED updates, then counts with torch.profiler, over PROFILED
updates, the host's kernel launches (CUDA runtime and driver launch calls; a CUDA graph launch
counts once) and the kernels the GPU ran. Writes OUT.json."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from mt_cli.config.recipe import load_config
from mt_cli.disk.layout import RunDir
from mt_cli.runtime.device import resolve_device
from mt_cli.runtime.distributed import Distributed
from mt_cli.train.run import prepare_data
from mt_cli.train.trainer import Trainer

WARMUP, TIMED, PROFILED = 20, 30, 10
LAUNCHES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx"}
LAUNCHES |= {"cudaGraphLaunch"}  # a captured graph: one launch for all its kernels


def main() -> None:
    config, run_dir, out, *overrides = sys.argv[1:]
    cfg = load_config(Path(config), [*overrides, "train.val_bleu=false", "train.test_at_end=false"])
    run = RunDir(Path(run_dir))
    device = resolve_device(cfg.train.device)
    torch.manual_seed(cfg.train.seed)
    dist = Distributed()
    quiet = lambda message: None  # noqa: E731
    trainer = Trainer(cfg, run, prepare_data(cfg, run, dist, quiet), dist, quiet)
    updates = trainer.epoch_updates()
    groups = [next(updates) for _ in range(WARMUP + TIMED + PROFILED)]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def run_updates(chosen: list) -> float:
        sync()
        started = time.perf_counter()
        for group in chosen:
            trainer.update(group)
        trainer.settle()
        sync()
        return time.perf_counter() - started

    warmup_s = run_updates(groups[:WARMUP])
    timed_s = run_updates(groups[WARMUP : WARMUP + TIMED])
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        run_updates(groups[WARMUP + TIMED :])
    events = prof.events()
    launches = sum(e.name in LAUNCHES for e in events)
    kernels = sum(e.device_type.name == "CUDA" and not e.name.startswith("Memcpy") for e in events)
    tokens = sum(b.src_tokens + b.tgt_tokens for group in groups[WARMUP : WARMUP + TIMED] for b in group)
    report = {
        "device": str(device),
        "overrides": overrides,
        "warmup_s": warmup_s,
        "ms_per_update": timed_s / TIMED * 1000,
        "tokens_per_s": tokens / timed_s,
        "launches_per_update": launches / PROFILED,
        "gpu_kernels_per_update": kernels / PROFILED,
    }
    Path(out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
