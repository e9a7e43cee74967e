"""Timing, peak memory and the printed table of ``mt bench``'s rows.

Timed repeats are interleaved, in alternating order (A B C, C B A, ...), so that slow drifts of
the machine hit every row alike; the table shows medians and ratios of medians.

Peak memory comes after all timing, from one extra untimed run per row on its largest batch: the
peak above what was held before that run (weights and optimizer state excluded; gradients,
activations and caches count). CUDA: ``torch.cuda.max_memory_allocated``. CPU: torch keeps no
allocator statistics there, so it is the growth of the process's resident set (Linux ``VmHWM``,
reset through ``/proc/self/clear_refs``), with glibc told to hand freed blocks back to the system
(``mallopt``, ``malloc_trim``) so that memory freed by earlier rows does not hide it; NaN where
that is not possible. Timing is over by then, so these allocator settings never slow a timed run.
"""

from __future__ import annotations

import ctypes
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class Row:
    task: str  # train | translate
    impl: str
    precision: str
    run: Callable[[], int]  # one timed repeat; returns its tokens (train: real src+tgt; translate: generated)
    probe: Callable[[], Any]  # one run on the largest batch, for peak memory
    sentences: int = 0
    seconds: list[float] = field(default_factory=list)
    tokens: int = 0
    peak_mib: float = math.nan
    outputs: dict[int, list[int]] = field(default_factory=dict)  # translate: input index -> ids
    flops: float = 0.0  # train: model FLOPs of one repeat (``model.flops``)
    peak_flops: float | None = None  # train: the device's peak in this precision (``runtime.flops``)

    def as_dict(self) -> dict[str, Any]:
        median = statistics.median(self.seconds)
        achieved = self.flops / median if self.flops else None
        return {
            "task": self.task,
            "impl": self.impl,
            "precision": self.precision,
            "seconds": self.seconds,
            "median_s": median,
            "tokens": self.tokens,
            "tokens_per_s": self.tokens / median,
            "sentences": self.sentences,
            "sentences_per_s": self.sentences / median if self.sentences else None,
            "peak_mib": self.peak_mib,
            "tflops": achieved / 1e12 if achieved else None,
            "mfu": achieved / self.peak_flops if achieved and self.peak_flops else None,
        }


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_rows(rows: list[Row], repeats: int, device: torch.device, log: Callable[[str], None]) -> None:
    for row in rows:
        row.probe()  # warm-up: kernels, allocator, optimizer state
    for r in range(repeats):
        for row in rows if r % 2 == 0 else rows[::-1]:
            sync(device)
            start = time.perf_counter()
            row.tokens = row.run()
            sync(device)
            row.seconds.append(time.perf_counter() - start)
        log(
            f"  repeat {r + 1}/{repeats}: "
            + " | ".join(f"{row.impl} {row.precision} {row.seconds[-1]:.2f} s" for row in rows)
        )


def _status_kib(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))


def _peak_mib(device: torch.device, probe: Callable[[], Any], libc: Any) -> float:
    """Peak memory above the start while ``probe()`` runs (see the module doc)."""
    if device.type == "cuda":
        sync(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        probe()
        sync(device)
        return (torch.cuda.max_memory_allocated(device) - base) / 2**20
    try:
        libc.malloc_trim(0)
        base = _status_kib("VmRSS")
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")  # reset VmHWM to the current resident set
        probe()
        return (_status_kib("VmHWM") - base) / 1024
    except (OSError, AttributeError, StopIteration, ValueError):
        return math.nan


def measure_peaks(rows: list[Row], device: torch.device) -> None:
    libc = None
    if device.type == "cpu":
        try:
            libc = ctypes.CDLL("libc.so.6")
            libc.mallopt(-3, 16384)  # M_MMAP_THRESHOLD: blocks >= 16 KiB are mapped and unmapped when freed
        except (OSError, AttributeError):
            pass
    try:
        for row in rows:
            row.peak_mib = _peak_mib(device, row.probe, libc)
    finally:
        if libc is not None:
            # A fixed threshold cannot be undone; 32 MiB is where glibc's dynamic one tops out.
            libc.mallopt(-3, 32 * 2**20)


def format_report(report: dict[str, Any]) -> list[str]:
    m = report["model"]
    lines = [
        f"device {report['device']} | torch {report['torch']}",
        f"model d_model={m['d_model']} layers={m['encoder_layers']}+{m['decoder_layers']} "
        f"{m['parameters'] / 1e6:.2f}M parameters | weights: {report['weights']}",
        f"train: {report['train_batches']} batches x {report['repeats']} timed repeats; translate: "
        f"{report['sentences']} test2016 sentences x {report['decode_repeats']} timed repeats (medians)",
        "",
        f"{'task':<10}{'implementation':<29}{'prec':<6}{'median s':>10}{'tokens/s':>11}"
        f"{'sent/s':>9}{'peak MiB':>10}{'MFU':>8}",
    ]
    for r in report["rows"]:
        sent = f"{r['sentences_per_s']:.1f}" if r["sentences_per_s"] else "-"
        mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "-"
        lines.append(
            f"{r['task']:<10}{r['impl']:<29}{r['precision']:<6}{r['median_s']:>10.3f}"
            f"{r['tokens_per_s']:>11,.0f}{sent:>9}{r['peak_mib']:>10.1f}{mfu:>8}"
        )
    lines.append("")
    for name, value in report["ratios"].items():
        lines.append(f"{name:<46}{value:>8.2f}x")
    lines.append(f"{'naive output equals our greedy':<46}{report['naive_matches_greedy']:>9.1%}")
    lines += [
        "",
        "tokens/s: train = real source+target tokens per forward+backward+AdamW step; "
        "translate = generated tokens (EOS included)",
        "MFU: model FLOPs (mt_cli/model/flops.py) per second over the peak: "
        + "; ".join(
            f"{name} {tflops:.2f} TFLOP/s ({source})" for name, (tflops, source) in report["peaks"].items()
        ),
        "peak MiB: above what the row held before (weights, optimizer state), on its largest batch; "
        + (
            "CUDA allocated memory"
            if report["device"].startswith("cuda")
            else "growth of the process's resident set"
        ),
    ]
    return lines
