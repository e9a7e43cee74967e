"""Decoding in worker processes (decode/processes.py): the same lines as in this process, workers
that stop with their engine or their parent, and a worker's death as one error."""

from __future__ import annotations

import dataclasses
import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from helpers import alive, wait_until

from mt_cli.config.options import Sampling, TranslateOptions
from mt_cli.decode.translator import Translator
from mt_cli.disk.reading import read_lines
from mt_cli.errors import RunFailure
from mt_cli.tools.engines import child_pids
from mt_cli.trained import load_trained


def children(pid: int) -> set[int]:
    """The live (not zombie) child processes of ``pid``."""
    return {child for child in child_pids(pid) if alive(child)}


def small_batches(translator: Translator, processes: int) -> Translator:
    """The translator with 2 decoding processes or 1, and batches small enough to make several."""
    decode = dataclasses.replace(translator.card.decode, max_tokens=300)
    return dataclasses.replace(
        translator, card=dataclasses.replace(translator.card, decode=decode), processes=processes
    )


@pytest.fixture(scope="module")
def lines(data_dir: Path) -> list[str]:
    return read_lines(data_dir / "val.de.gz")[:120]


@pytest.fixture(scope="module")
def loaded(trained_run: Path) -> Translator:
    return Translator.of(load_trained(trained_run), device="cpu")


@pytest.mark.parametrize(
    "options",
    [
        TranslateOptions(beam=1),
        TranslateOptions(beam=4, n_best=2),
        TranslateOptions(sampling=Sampling(top_k=5, seed=3)),
    ],
    ids=["greedy", "beam-n-best", "sampling"],
)
def test_worker_processes_translate_every_line_as_this_process_does(
    loaded: Translator, lines: list[str], options: TranslateOptions
) -> None:
    here, pooled = small_batches(loaded, 1), small_batches(loaded, 2)
    assert len(here.batches(here.encode_sources(lines, print), options.beam or 1)) >= 4
    expected = here.translate(lines, options)
    assert pooled.translate(lines, options) == expected
    assert pooled._pool is not None  # the lines did go through the workers
    assert len(children(os.getpid())) >= 2


def test_dropping_the_engine_stops_its_workers(loaded: Translator, lines: list[str]) -> None:
    before = children(os.getpid())
    pooled = small_batches(loaded, 2)
    pooled.translate(lines[:40])
    workers = children(os.getpid()) - before
    assert len(workers) == 2
    threads = threading.active_count()
    del pooled
    gc.collect()
    # Ended, not ending: a pool still stopping when Python exits races its exit hook.
    assert not any(alive(pid) for pid in workers)
    assert threading.active_count() < threads  # the executor's manager thread too


def test_a_dead_worker_is_one_error_and_the_next_call_forks_new_ones(
    loaded: Translator, lines: list[str]
) -> None:
    before = children(os.getpid())
    pooled = small_batches(loaded, 2)
    expected = pooled.translate(lines[:40])
    workers = children(os.getpid()) - before
    os.kill(min(workers), signal.SIGKILL)
    assert wait_until(lambda: not alive(min(workers)))
    with pytest.raises(RunFailure, match="a decoding worker process died"):
        pooled.translate(lines[:40])
    assert pooled.translate(lines[:40]) == expected


SCRIPT = """
import dataclasses, sys
from mt_cli.decode.translator import Translator
from mt_cli.trained import load_trained
from mt_cli.disk.reading import read_lines
t = Translator.of(load_trained(sys.argv[1]), device="cpu")
decode = dataclasses.replace(t.card.decode, max_tokens=200)
t = dataclasses.replace(t, card=dataclasses.replace(t.card, decode=decode), processes=2)
lines = read_lines(sys.argv[2])
t.translate(lines[:40])
print("ready", flush=True)
while True:
    t.translate(lines)
"""


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill"])
def test_workers_end_with_their_parent(
    trained_run: Path, data_dir: Path, stop: signal.Signals, spawn
) -> None:
    proc = spawn(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), str(trained_run), str(data_dir / "val.de.gz")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline() == "ready\n", proc.stderr.read()
    workers = children(proc.pid)
    assert len(workers) == 2
    time.sleep(0.5)  # in the middle of a call
    proc.send_signal(stop)
    code = proc.wait(timeout=60)
    assert code == -stop  # Python ends an unhandled KeyboardInterrupt by the signal
    if stop == signal.SIGINT:
        assert proc.stderr.read().strip().splitlines()[-1] == "KeyboardInterrupt"
    assert wait_until(lambda: not any(alive(pid) for pid in workers))
