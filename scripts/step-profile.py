# Run from the repository root, alone on the machine (RUN_DIR holds the tokenizers, e.g. from
# `mt prepare --config configs/multi30k.yaml --run RUN_DIR`; key=value: config overrides):
#   python scripts/step-profile.py RUN_DIR [key=value ...]
"""Time and profile training updates of the default recipe in this process.

Times updates 11-40 of epoch 1, then prints torch.profiler's table for updates 41-50.
"""

import sys
import time
from pathlib import Path

import torch
from torch.profiler import profile

from mt_cli.config.recipe import load_config
from mt_cli.disk.layout import RunDir
from mt_cli.runtime.distributed import Distributed
from mt_cli.train.run import prepare_data
from mt_cli.train.trainer import Trainer

overrides = sys.argv[2:] + ["train.val_bleu=false", "train.test_at_end=false"]
cfg = load_config(Path("configs/multi30k.yaml"), overrides)
run = RunDir(Path(sys.argv[1]))
dist = Distributed.from_env(torch.device("cpu"))
torch.manual_seed(cfg.train.seed)
trainer = Trainer(cfg, run, prepare_data(cfg, run, dist, lambda message: None), dist, print)
updates = trainer.epoch_updates()
groups = [next(updates) for _ in range(50)]
for group in groups[:10]:
    trainer.update(group)
start, tokens = time.perf_counter(), 0
for group in groups[10:40]:
    trainer.update(group)
    tokens += sum(b.src_tokens + b.tgt_tokens for b in group)
seconds = time.perf_counter() - start
print(
    f"precision {trainer.dtype or torch.float32}: {seconds / 30 * 1000:.0f} ms per update, "
    f"{tokens / seconds:.0f} tokens/s"
)
with profile() as prof:
    for group in groups[40:50]:
        trainer.update(group)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
