# The JSON summary of one scripts/gpu-check.sh call (it runs this last):
#   python scripts/gpu-check-summary.py OUT_DIR > OUT_DIR/gpu-check.json
"""Reads what the stages left in OUT_DIR and prints one JSON object: the keys docs/benchmarks.md
records, ``null`` for what a stage did not measure (it did not run, failed, or hit its cap)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

DEFAULT_UPDATES = 12000
WARMUP_INTERVALS = 2  # log intervals left out of the WMT rates: compilation, the allocator's pools


def read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def rows(path: Path, event: str) -> list[dict]:
    if not path.is_file():
        return []
    return [row for line in path.read_text().splitlines() if (row := json.loads(line))["event"] == event]


def last_line(path: Path) -> str | None:
    lines = path.read_text().strip().splitlines() if path.is_file() else []
    return lines[-1] if lines else None


def gpu_name() -> str | None:
    query = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]
    try:
        found = subprocess.run(query, capture_output=True, text=True, check=False)
    except FileNotFoundError:  # no NVIDIA driver tools: no GPU to name
        return None
    return found.stdout.strip().splitlines()[0] if found.returncode == 0 and found.stdout.strip() else None


def commit() -> str | None:
    if os.environ.get("GPU_CHECK_COMMIT"):
        return os.environ["GPU_CHECK_COMMIT"]
    query = ["git", "rev-parse", "--short", "HEAD"]
    found = subprocess.run(query, capture_output=True, text=True, check=False)
    return found.stdout.strip() or None


def default_figures(out: Path) -> dict:
    test = read_json(out / "default-test.json")
    train = rows(out / "default-metrics.jsonl", "train")
    finished = test is not None and test.get("updates") == DEFAULT_UPDATES
    last = train[-1] if train else None
    return {
        "default_12k_train_s": test["training_minutes"] * 60 if finished else None,
        "default_test_bleu_beam5": test["scores"]["beam5"]["bleu"] if finished else None,
        "default_test_bleu_greedy": test["scores"]["greedy"]["bleu"] if finished else None,
        "default_updates_done": last["step"] if last else None,
        "default_ms_per_update": last["elapsed"] / last["step"] * 1000 if last else None,
    }


def wmt_figures(out: Path) -> dict:
    train = rows(out / "wmt-metrics.jsonl", "train")[WARMUP_INTERVALS:]
    if not train:
        return {"wmt_tokens_per_s": None, "wmt_mfu": None}
    mfu = [row["mfu"] for row in train if row.get("mfu") is not None]
    return {
        "wmt_tokens_per_s": statistics.median(row["tokens_per_s"] for row in train),
        "wmt_mfu": statistics.median(mfu) if mfu else None,
        "wmt_tflops": statistics.median(row["tflops"] for row in train),
    }


def decode_figures(out: Path) -> dict:
    decode = read_json(out / "decode.json") or {}
    return {
        "decode_baseline": decode.get("baseline"),
        "decode_greedy_ratio": decode.get("greedy", {}).get("ratio"),
        "decode_beam5_ratio": decode.get("beam5", {}).get("ratio"),
        "decode": decode or None,
    }


def main() -> None:
    out = Path(sys.argv[1])
    launches = read_json(out / "launches-default.json") or {}
    compiled = read_json(out / "launches-compiled.json") or {}
    summary = {
        "gpu": gpu_name(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "commit": commit(),
        **wmt_figures(out),
        **default_figures(out),
        "launches_per_update_default": launches.get("launches_per_update"),
        "ms_per_update_default_eager": launches.get("ms_per_update"),
        "launches_per_update_default_compiled": compiled.get("launches_per_update"),
        "ms_per_update_default_compiled": compiled.get("ms_per_update"),
        **decode_figures(out),
        "tests": last_line(out / "tests.log"),
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
