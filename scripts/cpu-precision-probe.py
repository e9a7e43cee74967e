# Run from the repository root, alone on the machine:
#   python scripts/cpu-precision-probe.py
"""Which precision a CPU can train in: native-bf16 check and fp32 vs bf16-autocast matmul rates.

On a CPU without AVX512-BF16, oneDNN emulates bf16 and the bf16 row is ~100x slower than fp32,
which is why `train.amp: bf16` is refused there and `auto` means fp32 (mt_cli/device.py).
"""

import re
import time

import torch

from mt_cli.runtime.device import cpu_has_native_bf16


def gflops(m: int, k: int, n: int, dtype: torch.dtype | None, repeats: int) -> float:
    a, b = torch.randn(m, k), torch.randn(k, n)
    context = torch.autocast("cpu", dtype=dtype) if dtype else torch.autocast("cpu", enabled=False)
    with context:
        a @ b
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
    return 2 * m * k * n * repeats / (time.perf_counter() - start) / 1e9


flags = open("/proc/cpuinfo").read()
model = re.search(r"model name\s*:\s*(.*)", flags)
print(
    "cpu:",
    model.group(1) if model else "?",
    "| avx512 flags:",
    sorted(set(re.findall(r"avx512\w*|amx\w*", flags))),
)
print(
    "native bf16 (torch.cpu._is_avx512_bf16_supported):",
    cpu_has_native_bf16(),
    "| threads:",
    torch.get_num_threads(),
)
for m, k, n in ((512, 512, 512), (2048, 256, 1024), (2048, 256, 4000)):
    fp32 = gflops(m, k, n, None, 20)
    repeats = 20 if cpu_has_native_bf16() else 1  # emulated bf16 takes seconds per product
    bf16 = gflops(m, k, n, torch.bfloat16, repeats)
    print(f"({m}, {k}) x ({k}, {n}): fp32 {fp32:.0f} GFLOP/s | bf16 autocast {bf16:.1f} GFLOP/s")
