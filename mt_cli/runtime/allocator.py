"""glibc's malloc told to keep freed memory for the next decoding step (``reuse_freed_memory``),
and Python's cycle collector held off while a batch decodes (``no_cycle_collection``).

torch allocates CPU tensors with malloc. A decoding step makes and frees tensors of megabytes (the
step's scores over the vocabulary, the reordered key/value cache); by default glibc gives the top
of its heap back to the system once more than ``M_TRIM_THRESHOLD`` of it is free, and the next step
faults every page of it in again, zero-filled by the kernel. With the threshold high, and blocks
up to ``M_MMAP_THRESHOLD`` served from the heap rather than mapped one by one (setting either
switches off glibc's dynamic thresholds, so both are set), the pages stay: a fifth of the page
faults and ~10% less CPU time for beam 5 in fp32 on a Zen 5 (docs/benchmarks.md, "Engines"). The
price: the process keeps its peak heap until it exits.

Only where the C library is glibc (Linux); elsewhere nothing changes.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import sys
from collections.abc import Iterator

_M_TRIM_THRESHOLD = -1  # malloc.h
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = (
    32 * 2**20
)  # glibc's largest allowed (HEAP_MAX / 2 on 64-bit): blocks below come from the heap
TRIM_THRESHOLD = 2**30  # free memory at the top of the heap is handed back only past 1 GiB


@functools.cache
def reuse_freed_memory() -> bool:
    """Set glibc's thresholds once per process (forked workers inherit them); True if they were set."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


@contextlib.contextmanager
def no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector off inside (as it was after). A decoding step makes hundreds of
    tensors and frees them by reference count; their allocations alone start collections that scan
    every object the process holds, ~1.5% of fp32 beam search's time and nothing found
    (docs/benchmarks.md, "Engines")."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
