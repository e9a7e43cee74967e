# Run alone on the machine, from anywhere (RUN_DIR holds a run's tokenizers and prepared corpus, e.g.
# from `mt prepare --config configs/multi30k.yaml --run RUN_DIR`; CHECKOUT: a checkout of mt, e.g. a
# `git worktree` of the commit before a change; key=value: config overrides):
#   python scripts/update-ab.py RUN_DIR CHECKOUT_A CHECKOUT_B [key=value ...]
"""Time training updates of two checkouts of mt side by side, on the same batches.

Each round runs one process per checkout (A B, then B A, ...), each with that checkout's code and
configs/multi30k.yaml: 10 untimed updates, then 30 timed ones, the same batches for both since the
seed and data are the same. Prints the milliseconds per update of every round and the mean loss of
the timed updates (equal losses: the two compute the same training).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

ROUNDS = 6

CHILD = r"""
import json, sys, time
from pathlib import Path
import torch
import mt_cli
from mt_cli.config.recipe import load_config
from mt_cli.disk.layout import RunDir
from mt_cli.runtime.distributed import Distributed
from mt_cli.train.run import prepare_data
from mt_cli.train.trainer import Trainer

recipe = Path(mt_cli.__file__).parents[1] / "configs" / "multi30k.yaml"
cfg = load_config(recipe, ["train.val_bleu=false", "train.test_at_end=false", *sys.argv[2:]])
run = RunDir(Path(sys.argv[1]))
dist = Distributed()  # one process
torch.manual_seed(cfg.train.seed)
trainer = Trainer(cfg, run, prepare_data(cfg, run, dist, lambda message: None), dist, lambda message: None)
updates = trainer.epoch_updates()
groups = [next(updates) for _ in range(40)]
for group in groups[:10]:
    trainer.update(group)
start = time.perf_counter()
losses = []
for group in groups[10:]:
    queued = trainer.update(group)  # (loss, norm) before the trainer read outcomes late
    losses.append(queued[0] if queued is not None else trainer.settle().loss)
seconds = time.perf_counter() - start
print(json.dumps({"ms": seconds / len(losses) * 1000, "loss": sum(losses) / len(losses)}))
"""


def time_checkout(checkout: str, run_dir: str, overrides: list[str]) -> dict[str, float]:
    """One process of ``checkout``'s code: its ms per update and mean loss."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, run_dir, *overrides],
        env={**os.environ, "PYTHONPATH": checkout},
        cwd="/",
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    run_dir, *checkouts = [a for a in sys.argv[1:] if "=" not in a]
    overrides = [a for a in sys.argv[1:] if "=" in a]
    results: dict[str, list[dict[str, float]]] = {c: [] for c in checkouts}
    for round_ in range(ROUNDS):
        for checkout in checkouts if round_ % 2 == 0 else checkouts[::-1]:
            results[checkout].append(time_checkout(checkout, run_dir, overrides))
    for checkout, rows in results.items():
        times = [round(r["ms"], 1) for r in rows]
        print(
            f"{checkout}: ms per update {times}, median {statistics.median(times):.1f}, "
            f"mean loss {sorted({round(r['loss'], 4) for r in rows})}"
        )


if __name__ == "__main__":
    main()
