# Run from the repository root, alone on the machine:
#   python scripts/decode-processes.py RUN_DIR [BEAM]
"""mt's engine on all 1,000 test2016 sources, side by side in one process: decoding in this
process on every thread, in this process on one thread, and in worker processes (one per thread,
``decode/processes.py``). Prints the best of three passes of each (after a warm-up pass) and the
share of lines identical to the first, in mt's default precision.
"""

import dataclasses
import sys
import time

import torch

from mt_cli.config.options import TranslateOptions
from mt_cli.decode.translator import Translator
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.trained import load_trained

run = sys.argv[1]
beam = int(sys.argv[2]) if len(sys.argv) > 2 else 5
lines = read_lines(SHIPPED_MULTI30K / "test_2016_flickr.de.gz")
threads = torch.get_num_threads()
here = Translator.of(load_trained(run), "cpu")
here.processes = 1
workers = dataclasses.replace(here, processes=threads)
cases = [(f"this process, {threads} threads", here, threads), ("this process, 1 thread", here, 1)]
cases.append((f"{threads} worker processes", workers, threads))
options = TranslateOptions(beam=beam)
rates: dict[str, list[float]] = {name: [] for name, _, _ in cases}
outputs: dict[str, list[str]] = {}
for rep in range(4):
    for name, translator, count in cases:
        torch.set_num_threads(count)
        start = time.perf_counter()
        out = translator.translate(lines, options)
        if rep > 0:  # the first pass warms every case up
            rates[name].append(len(lines) / (time.perf_counter() - start))
        outputs[name] = [t.text for t in out]
first = outputs[cases[0][0]]
for name, _, _ in cases:
    same = sum(a == b for a, b in zip(first, outputs[name])) / len(lines)
    print(f"beam {beam}, {name}: {max(rates[name]):.1f} lines/s (best of 3), same as the first {same:.1%}")
