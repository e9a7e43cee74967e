"""The FLOPs per second a device can reach, the denominator of model FLOPs utilisation (MFU).

GPUs: the datasheet's dense tensor-core rate for the precision (no sparsity). CPUs publish no
such number for their matrix units, so mt measures one: the best of a few large matrix products
in the training precision on every thread, the most a perfect model could get from this
machine. MFU on a CPU is therefore against what its matmuls reach, not a marketing figure.
"""

from __future__ import annotations

import functools
import time

import torch

# Dense TFLOP/s per GPU name fragment: (bf16/fp16 tensor cores, fp32 without TF32). First match wins,
# so the more specific names come first.
GPU_PEAK_TFLOPS = (
    ("H100 PCIe", 756.0, 51.0),
    ("H100", 989.4, 66.9),  # SXM
    ("H200", 989.4, 66.9),
    ("A100", 312.0, 19.5),
    ("L40S", 362.1, 91.6),
    ("L4", 121.0, 30.3),
    ("A10", 125.0, 31.2),
)
MATMUL_SIZE = 2048


def peak_flops(device: torch.device, dtype: torch.dtype | None) -> tuple[float | None, str]:
    """(FLOP/s, where the number comes from); None where the device is not known."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for fragment, half, single in GPU_PEAK_TFLOPS:
            if fragment in name:
                return (single if dtype is None else half) * 1e12, f"{name} datasheet"
        return None, f"{name}: no datasheet peak known to mt"
    return measured_matmul_flops(device, dtype), "measured matmul peak"


@functools.cache  # a second of matmuls, once per process and precision
def measured_matmul_flops(device: torch.device, dtype: torch.dtype | None, seconds: float = 1.0) -> float:
    """The best FLOP/s of (MATMUL_SIZE)^2 matrix products in ``dtype`` (None: fp32), repeated for
    ``seconds`` and at least 10 times: on a shared machine one product in a few is slowed down
    (single tries of 5 read 0.21-0.42 TFLOP/s on one 2-core Zen 4 in bf16)."""
    n = MATMUL_SIZE
    generator = torch.Generator(device="cpu").manual_seed(0)  # the training random stream is left alone
    a, b = (torch.randn(n, n, generator=generator).to(device, dtype or torch.float32) for _ in range(2))
    torch.matmul(a, b)  # warm-up: kernels chosen, memory allocated
    best, began, tries = float("inf"), time.perf_counter(), 0
    while tries < 10 or time.perf_counter() - began < seconds:
        start = time.perf_counter()
        torch.matmul(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best, tries = min(best, time.perf_counter() - start), tries + 1
    return 2 * n**3 / best
