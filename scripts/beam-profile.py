# Run from the repository root, alone on the machine:
#   python scripts/beam-profile.py RUN_DIR [BEAM] [LINES]
"""Where mt's beam search spends its time: torch.profiler's table of one decode of the first
LINES (default 200) test2016 sources with beam BEAM (default 5), in mt's default precision,
after a warm-up decode of the same lines. Prints the wall time (every thread) and the top
operators by self CPU time of one more decode on one thread; the share of the time in matrix
products against everything else is the point.
"""

import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from mt_cli.config.options import TranslateOptions
from mt_cli.decode.translator import Translator
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.trained import load_trained

run = sys.argv[1]
beam = int(sys.argv[2]) if len(sys.argv) > 2 else 5
count = int(sys.argv[3]) if len(sys.argv) > 3 else 200
lines = read_lines(SHIPPED_MULTI30K / "test_2016_flickr.de.gz")[:count]
translator = Translator.of(load_trained(run), "cpu")
translator.processes = 1  # one process: the profiler sees only this one, and one step is the point
options = TranslateOptions(beam=beam)
translator.translate(lines, options)  # warm-up: oneDNN builds its kernels per shape
start = time.perf_counter()
translator.translate(lines, options)
seconds = time.perf_counter() - start
rate = count / seconds
print(f"{count} lines, beam {beam}, precision {translator.dtype}: {seconds:.2f} s, {rate:.1f} lines/s")
# One thread: the table then reads as the work of one core.
torch.set_num_threads(1)
with profile(activities=[ProfilerActivity.CPU]) as prof:
    translator.translate(lines, options)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
