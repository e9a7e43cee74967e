# Run from the repository root, alone on the machine:
#   python scripts/linear-rates.py
#   ONEDNN_MAX_CPU_ISA=AVX2 python scripts/linear-rates.py     # oneDNN as on an AVX2-only CPU
"""The linear layers of decoding on one thread: ``F.linear`` (MKL's sgemm in fp32, oneDNN with a
reorder per call in bf16) against ``model.packed.Linear`` on a weight packed once for oneDNN, in
fp32 and bf16, at the shapes of a decoding step (100 and 500 rows: hypotheses in a batch) of the
default model (d_model 256, d_ff 1024, 4,000 target pieces). Prints microseconds, GFLOP/s and the
largest difference between the two outputs (docs/benchmarks.md, "Engines")."""

import time

import torch
import torch.nn.functional as F

from mt_cli.model.packed import Linear


def microseconds(fn, x: torch.Tensor, repeats: int = 100) -> float:
    for _ in range(10):
        fn(x)
    best = float("inf")
    for _ in range(3):  # best of three: other processes on the machine only ever slow a pass down
        start = time.perf_counter()
        for _ in range(repeats):
            fn(x)
        best = min(best, (time.perf_counter() - start) / repeats * 1e6)
    return best


torch.manual_seed(0)
torch.set_num_threads(1)
print(f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, one thread")
with torch.inference_mode():
    for dtype in (torch.float32, torch.bfloat16):
        for rows in (100, 500):
            for inner, outer in ((256, 768), (256, 1024), (1024, 256), (256, 4000)):
                layer = Linear(inner, outer).to(dtype)
                x = torch.randn(rows, inner, dtype=dtype)
                plain_us = microseconds(lambda v, w=layer.weight, b=layer.bias: F.linear(v, w, b), x)
                layer.pack()
                packed_us = microseconds(layer, x)
                diff = (layer(x).float() - F.linear(x, layer.weight, layer.bias).float()).abs().max()
                flop = 2 * rows * inner * outer
                print(
                    f"{str(dtype)[6:]:<9} {rows:>4} x {inner:>4} -> {outer:>4}: "
                    f"F.linear {plain_us:7.0f} us ({flop / plain_us / 1e3:4.0f} GFLOP/s)  "
                    f"packed {packed_us:7.0f} us ({flop / packed_us / 1e3:4.0f} GFLOP/s)  "
                    f"{plain_us / packed_us:4.2f}x  max diff {diff:.1e}"
                )
