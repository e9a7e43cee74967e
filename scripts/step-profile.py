# Run from the repository root, alone on the machine (RUN_DIR holds the tokenizers, e.g. from
# `mt prepare --config configs/multi30k.yaml --run RUN_DIR`, or is prepared here; key=value:
# config overrides):
#   python scripts/step-profile.py RUN_DIR [--config PATH] [key=value ...]
"""Time and profile training updates of a recipe (default: configs/multi30k.yaml) in this process,
on the device train.device picks (a GPU where there is one).

Times updates 11-40 of epoch 1, then prints torch.profiler's table for updates 41-50, sorted by
self CPU time, or on a GPU by self CUDA time (and then by CPU time: a host-bound update shows
there). On a GPU the timings wait for the device (synchronize) before reading the clock.
"""

import argparse
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from mt_cli.config.recipe import load_config
from mt_cli.disk.layout import RunDir
from mt_cli.runtime.device import resolve_device
from mt_cli.runtime.distributed import Distributed
from mt_cli.tools.timing import sync
from mt_cli.train.run import prepare_data
from mt_cli.train.trainer import Trainer

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("run_dir", type=Path)
parser.add_argument("overrides", nargs="*", help="config overrides, key=value")
parser.add_argument("--config", type=Path, default=Path("configs/multi30k.yaml"))
args = parser.parse_args()

cfg = load_config(args.config, [*args.overrides, "train.val_bleu=false", "train.test_at_end=false"])
args.run_dir.mkdir(parents=True, exist_ok=True)
run = RunDir(args.run_dir)
device = resolve_device(cfg.train.device)
on_gpu = device.type == "cuda"
dist = Distributed.from_env(device, cfg.train.dist_timeout_minutes)
torch.manual_seed(cfg.train.seed)
trainer = Trainer(cfg, run, prepare_data(cfg, run, dist, lambda message: None), dist, print)
updates = trainer.epoch_updates()
groups = [next(updates) for _ in range(50)]
for group in groups[:10]:
    trainer.update(group)
sync(device)
start, tokens = time.perf_counter(), 0
for group in groups[10:40]:
    trainer.update(group)
    tokens += sum(b.src_tokens + b.tgt_tokens for b in group)
sync(device)
seconds = time.perf_counter() - start
print(
    f"{device}, precision {trainer.dtype or torch.float32}: {seconds / 30 * 1000:.1f} ms per update, "
    f"{tokens / seconds:.0f} tokens/s"
)
activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if on_gpu else [ProfilerActivity.CPU]
with profile(activities=activities) as prof:
    for group in groups[40:50]:
        trainer.update(group)
    sync(device)
tables = ["self_cuda_time_total", "self_cpu_time_total"] if on_gpu else ["self_cpu_time_total"]
for key in tables:
    print(prof.key_averages().table(sort_by=key, row_limit=15))
