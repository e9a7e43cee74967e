"""Decoding batches side by side in worker processes, one intra-op thread each.

On a CPU, one batch on every core (torch's intra-op threads) leaves the cores idle between the
many small operators of a decoding step; one batch per core does not. Threads cannot do it: the
Python between operators holds the GIL. So a ``BatchPool`` forks one worker per core, each with
one thread, that inherits the model (copy-on-write: nothing is pickled but the batch's ids and
its results). On the 2-core Zen 4: beam 5 1.53x, greedy 1.21x the speed of one process on both
threads, the same lines (scripts/decode-processes.py; docs/benchmarks.md, "Engines").

The pool lives as long as its engine: new workers meet every batch shape for the first time and
fill a fresh heap, which cost most of the gain when a pool was forked per call. The model must
therefore not change after the first pool starts (a ``Translator`` owns its model); training's
validation, which decodes a model that is still training, decodes in its own process.

A worker ignores Ctrl-C (the parent stops and cancels what has not started) and dies with the
parent (Linux's parent-death signal), so a killed ``mt translate`` leaves no process behind.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any

import torch

from mt_cli.errors import RunFailure

_PR_SET_PDEATHSIG = 1  # linux/prctl.h

# The decode function of this worker process: set once, when the worker starts.
_worker_decode: Callable[..., Any] | None = None


def available() -> bool:
    """Whether this platform can fork workers that inherit a loaded model (Linux)."""
    return sys.platform == "linux"


def default_processes(device: torch.device) -> int:
    """One worker per intra-op thread on a Linux CPU; 1 (decode in this process) otherwise."""
    return torch.get_num_threads() if device.type == "cpu" and available() else 1


def die_with_parent(parent: int) -> None:
    """SIGKILL this (forked) process when its parent ``parent`` dies (Linux's parent-death
    signal); exit at once if it already has, before the signal was armed."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _start_worker(decode: weakref.WeakMethod, parent: int) -> None:
    global _worker_decode
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)
    torch.set_num_threads(1)
    _worker_decode = decode()  # alive: the fork copied the parent, which holds the engine


def _decode_in_worker(*args: Any) -> Any:
    if _worker_decode is None:
        raise RuntimeError("a BatchPool task ran outside a BatchPool worker")
    return _worker_decode(*args)


class BatchPool:
    """``processes`` forked workers that each call ``decode(*task)`` for the tasks given to ``map``.

    ``decode``, a method of the engine, and what it reaches (the model) are inherited at the fork,
    so the workers start at the first ``map`` and see the objects as they were then. The pool
    holds the engine only weakly: dropping the engine stops the workers.
    """

    def __init__(self, decode: Callable[..., Any], processes: int) -> None:
        self.decode = weakref.WeakMethod(decode)  # type: ignore[arg-type]  # a bound method
        self.processes = processes
        self._executor: ProcessPoolExecutor | None = None

    def map(self, tasks: Sequence[tuple[Any, ...]]) -> list[Any]:
        """``decode(*task)`` of each task, in order; tasks run on the workers as they free up."""
        executor = self._start()
        futures = []
        try:
            futures = [executor.submit(_decode_in_worker, *task) for task in tasks]
            return [future.result() for future in futures]
        except BrokenProcessPool:
            self.close()
            raise RunFailure(
                "a decoding worker process died (out of memory?); lower decode.max_tokens and run again"
            ) from None
        except BaseException:
            # Ctrl-C or a worker's error: what has not started is dropped, the workers stay.
            for future in futures:
                future.cancel()
            raise

    def _start(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                self.processes,
                mp_context=get_context("fork"),
                initializer=_start_worker,
                initargs=(self.decode, os.getpid()),
            )
            weakref.finalize(self, _stop, self._executor)
        return self._executor

    def close(self) -> None:
        """Stop the workers (a later ``map`` forks new ones)."""
        if self._executor is not None:
            _stop(self._executor)
            self._executor = None


def _stop(executor: ProcessPoolExecutor) -> None:
    """Drop what has not started and return once the workers and the executor's manager thread
    have ended. A manager thread still ending when Python exits closes its wakeup pipe while the
    exit hook of concurrent.futures writes to it: "Exception ignored ... Bad file descriptor"
    after a command's output (Python 3.11; CPython bpo-39098, locked from 3.12 by gh-125451)."""
    executor.shutdown(wait=True, cancel_futures=True)
