"""Time and profile training updates on whatever device train.device picks: CONFIG RUN key=value..."""

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

config, run_dir, *overrides = sys.argv[1:]
cfg = load_config(Path(config), overrides + ["train.val_bleu=false", "train.test_at_end=false"])
Path(run_dir).mkdir(parents=True, exist_ok=True)
run = RunDir(Path(run_dir))
device = resolve_device(cfg.train.device)
dist = Distributed.from_env(device)
torch.manual_seed(cfg.train.seed)
t0 = time.perf_counter()
trainer = Trainer(cfg, run, prepare_data(cfg, run, dist, print), dist, print)
print(f"setup {time.perf_counter() - t0:.1f} s")
updates = trainer.epoch_updates()
groups = [next(updates) for _ in range(40)]
sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def timed(chosen, label):
    sync()
    start, tokens = time.perf_counter(), 0
    for group in chosen:
        trainer.update(group)
        tokens += sum(b.src_tokens + b.tgt_tokens for b in group)
    sync()
    seconds = time.perf_counter() - start
    print(f"{label}: {seconds / len(chosen) * 1000:.1f} ms per update, {tokens / seconds:,.0f} tokens/s")


timed(groups[:5], "updates 1-5 (warm-up)")
timed(groups[5:25], "updates 6-25")
activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
with profile(activities=activities) as prof:
    timed(groups[25:30], "updates 26-30 (profiled)")
key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
print(prof.key_averages().table(sort_by=key, row_limit=25, max_name_column_width=60))
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=60))
# The model alone: forward, loss, backward, optimizer step, no Trainer bookkeeping.
from mt_cli.model.loss import token_loss  # noqa: E402
from mt_cli.runtime.device import autocast  # noqa: E402

sync()
start = time.perf_counter()
for group in groups[30:40]:
    for batch in group:
        b = batch.to(device)
        with autocast(device, trainer.dtype):
            loss = token_loss(trainer.model(b.src, b.tgt_in, b.src_mask, b.tgt_mask), b.tgt_out, 0.1)
        (loss / b.tgt_tokens).backward()
    trainer.optimizer.step()
    trainer.optimizer.zero_grad(set_to_none=True)
sync()
print(f"bare loop: {(time.perf_counter() - start) / 10 * 1000:.1f} ms per update")
