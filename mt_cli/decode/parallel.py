"""Batches decoded side by side on a multi-core CPU, one thread each (CTranslate2's
``inter_threads``).

A decoding step is a few small matrix products and many small element-wise operations; spread
over several threads (torch's intra-op parallelism), each operation waits for the slowest
thread, and most are too small to split well. Two batches on two threads, each running its
operations alone, keep both cores busy instead: beam 5 on test2016 with the default recipe's
model decodes ~10% faster on a 2-core CPU (docs/benchmarks.md). Each batch is searched exactly
as it would be alone, so the output does not depend on this.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

Group = TypeVar("Group")
Result = TypeVar("Result")


def side_by_side(
    decode: Callable[[Group], Result], groups: Sequence[Group], device: torch.device
) -> list[Result]:
    """``decode`` of each group, in order: on a CPU with several threads and several groups,
    as many at once as torch has threads, each worker with one intra-op thread; else one after
    another with every thread."""
    workers = min(torch.get_num_threads(), len(groups)) if device.type == "cpu" else 1
    if workers <= 1:
        return [decode(group) for group in groups]
    # torch.set_num_threads sets the calling thread's OpenMP (and MKL) thread count: the
    # workers' own, leaving the caller's threads as they were.
    with ThreadPoolExecutor(workers, initializer=torch.set_num_threads, initargs=(1,)) as pool:
        return list(pool.map(decode, groups))
