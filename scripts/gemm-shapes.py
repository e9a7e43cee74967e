# Run from the repository root, alone on the machine:
#   python scripts/gemm-shapes.py
"""fp32 GFLOP/s of the training step's matrix-product shapes against MKL's best (a 4096-square product).

(2048, k) rows are about one side of a 4,096-token batch (docs/benchmarks.md, "CPUs without bf16").
"""

import time

import torch


def seconds_per_call(fn, repeats: int = 30) -> float:
    for _ in range(3):
        fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


torch.manual_seed(0)
square = torch.randn(4096, 4096)
print(f"4096-square x@w: {2 * 4096**3 / seconds_per_call(lambda: square @ square, 5) / 1e9:.1f} GFLOP/s")
for m, k, n in [(2048, 256, 1024), (2048, 1024, 256), (2048, 256, 256), (2048, 256, 4000), (2048, 256, 768)]:
    x, w = torch.randn(m, k), torch.randn(n, k)
    flops = 2 * m * k * n
    matmul = flops / seconds_per_call(lambda x=x, w=w: x @ w.T) / 1e9
    linear = flops / seconds_per_call(lambda x=x, w=w: torch.nn.functional.linear(x, w)) / 1e9
    print(f"({m}, {k}) x ({k}, {n}): x@w.T {matmul:.1f} GFLOP/s, linear {linear:.1f} GFLOP/s")
