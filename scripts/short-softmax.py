# Run from the repository root, alone on the machine:
#   python scripts/short-softmax.py
#   ATEN_CPU_CAPABILITY=avx2 python scripts/short-softmax.py     # torch's AVX2 kernels
"""torch's CPU softmax over short rows against max, exp and a sum over the whole tensor (what
``model.attention`` does below one vector of fp32 lanes), for 2,000 rows (500 hypotheses x 4
heads, one decoding step) of 2 to 48 keys, on one thread. Prints microseconds and the largest
difference (docs/benchmarks.md, "Engines")."""

import time

import torch


def microseconds(fn, repeats: int = 200) -> float:
    for _ in range(10):
        fn()
    best = float("inf")
    for _ in range(5):  # best of five: other processes on the machine only ever slow a pass down
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        best = min(best, (time.perf_counter() - start) / repeats * 1e6)
    return best


def elementwise(x: torch.Tensor) -> torch.Tensor:
    exp = (x - x.amax(-1, keepdim=True)).exp_()
    return exp.div_(exp.sum(-1, keepdim=True))


torch.manual_seed(0)
torch.set_num_threads(1)
print(f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, one thread, 2,000 rows")
with torch.inference_mode():
    for keys in (2, 5, 8, 12, 15, 16, 17, 24, 31, 32, 48):
        x = torch.randn(2000, keys)
        kernel_us = microseconds(lambda x=x: torch.softmax(x, -1))
        elementwise_us = microseconds(lambda x=x: elementwise(x))
        diff = (elementwise(x) - torch.softmax(x, -1)).abs().max()
        print(
            f"{keys:>3} keys: torch.softmax {kernel_us:6.0f} us  max/exp/sum {elementwise_us:6.0f} us  "
            f"max diff {diff:.0e}"
        )
