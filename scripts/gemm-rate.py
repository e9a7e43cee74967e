# Run from the repository root, alone on the machine:
#   python scripts/gemm-rate.py
"""bf16 matrix-product rate on this CPU at the shapes of decoding (540 rows) and training (2,000 rows).

Prints microseconds and GFLOP/s per shape for ``F.linear`` with and without bias and a plain
``x @ w`` (docs/benchmarks.md, "Why greedy decoding stays under 20x").
"""

import time

import torch
import torch.nn.functional as F


def microseconds(fn, *args: torch.Tensor, repeats: int = 200) -> float:
    for _ in range(10):
        fn(*args)
    start = time.perf_counter()
    for _ in range(repeats):
        fn(*args)
    return (time.perf_counter() - start) / repeats * 1e6


torch.manual_seed(0)
with torch.inference_mode():
    for rows in (540, 2000):
        for inner, outer in ((256, 768), (256, 256), (256, 1024), (1024, 256), (256, 4000)):
            x = torch.randn(rows, inner, dtype=torch.bfloat16)
            w = torch.randn(outer, inner, dtype=torch.bfloat16)
            b = torch.randn(outer, dtype=torch.bfloat16)
            wt = w.t().contiguous()
            flop = 2 * rows * inner * outer
            timings = {
                "linear+bias": microseconds(F.linear, x, w, b),
                "linear": microseconds(F.linear, x, w),
                "x@w": microseconds(torch.matmul, x, wt),
            }
            cells = "  ".join(
                f"{name} {us:.0f} us ({flop / us / 1e3:.0f} GFLOP/s)" for name, us in timings.items()
            )
            print(f"({rows}, {inner}) x ({inner}, {outer}): {cells}")
