# From the repository root:  python scripts/batch-size-rate.py --run RUN [--compute-type float32]
"""Sentences/s of the mt engine on one thread at each batch size, beam 5: what one of
`mt serve`'s decoding workers does with the batches its load allows (docs/benchmarks.md,
"`mt serve` under load"). Fresh task-1 training sentences, one warm-up batch first."""

from __future__ import annotations

import argparse
import time

import torch

import mt_cli
from mt_cli.config.options import TranslateOptions
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.serve.alternatives import decoder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True)
    parser.add_argument("--compute-type", default=None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8, 16, 32, 64, 128])
    args = parser.parse_args()
    model = mt_cli.load(args.run, device="cpu", processes=1, compute_type=args.compute_type).engine
    lines = read_lines(SHIPPED_MULTI30K / "train.de.gz")[1000:1400]
    options = model.resolve(TranslateOptions(scores=False))
    decode = decoder(model)
    torch.set_num_threads(1)
    decode(lines[:32], options)
    for size in args.sizes:
        count = max(128, 2 * size)
        started = time.monotonic()
        for start in range(0, count, size):
            decode(lines[start : start + size], options)
        print(f"batch {size}: {count / (time.monotonic() - started):.1f} sentences/s", flush=True)


if __name__ == "__main__":
    main()
