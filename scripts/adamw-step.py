# Run from the repository root, alone on the machine:
#   python scripts/adamw-step.py
"""One AdamW step on the default model's parameters: fused (what ``make_optimizer`` builds on
CPU and CUDA) against torch's per-tensor loop and its multi-tensor (foreach) loop.

Prints milliseconds per step for each, three interleaved rounds (docs/benchmarks.md, "Optimizer step").
"""

import time
from pathlib import Path

import torch

from mt_cli.config.recipe import load_config
from mt_cli.model.transformer import build_model
from mt_cli.train.optim import make_optimizer, parameter_groups

cfg = load_config(Path("configs/multi30k.yaml"))
torch.manual_seed(0)
model = build_model(cfg.model, cfg.tokenizer.src_vocab_size, cfg.tokenizer.tgt_vocab_size)
for param in model.parameters():
    param.grad = torch.randn_like(param)
tc = cfg.train
kinds = {
    "fused (make_optimizer)": lambda: make_optimizer(model, tc),
    "per-tensor loop": lambda: torch.optim.AdamW(
        parameter_groups(model, tc), lr=tc.lr, betas=tc.optimizer_betas, foreach=False
    ),
    "foreach": lambda: torch.optim.AdamW(
        parameter_groups(model, tc), lr=tc.lr, betas=tc.optimizer_betas, foreach=True
    ),
}
for round_ in range(3):
    for name, make in kinds.items():
        optimizer = make()
        for _ in range(3):
            optimizer.step()
        start = time.perf_counter()
        for _ in range(50):
            optimizer.step()
        print(f"round {round_ + 1} | {name}: {(time.perf_counter() - start) / 50 * 1e3:.1f} ms per step")
