"""``train.amp: auto`` on a CPU: the precision that trains this run faster here, measured on its
own first updates.

A CPU with native bf16 (AVX512-BF16, AMX) runs bf16 matrix products in hardware, but whether an
update is faster in bf16 depends on more than the instruction set: the casts, the dropout draws,
and the kernels the run's many batch shapes get. On 2-core AMD Zen 4/5 an update of the default
recipe is 1.5-2x as fast in bf16; on a 2-core Intel Xeon with AMX it was no faster (5.3k against
5.4k tokens/s), and on another 5.5-6.3k against 7.2-7.4k. A probe on one synthetic batch said
1.8x on that first Xeon: only the run's real batches tell. So ``auto`` trains its first updates
alternately in bf16 and fp32 (each precision's first ``WARMUP`` untimed), times the next
``TIMED`` of each, and keeps bf16 only where it trains at least ``MARGIN`` times as many tokens a
second: fp32 is the more exact of the two. Under DDP the ranks vote, so all go on in one precision.
Mixed precision only changes how products are computed, so the trial's updates are ordinary
updates of the run; a resumed run measures again.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from mt_cli.runtime.distributed import Distributed

MARGIN = 1.10  # bf16 must train at least this many times fp32's tokens a second to be kept
WARMUP = 4  # untimed updates of each precision first: new shapes' kernels, the allocator's pools
TIMED = 10  # timed updates of each precision, alternating, so both see the same mix of shapes
CANDIDATES: tuple[torch.dtype | None, ...] = (torch.bfloat16, None)  # None: fp32


class Precision:
    """The autocast dtype of each update: fixed, or (``trial``) alternating until measured."""

    def __init__(self, dtype: torch.dtype | None, trial: bool, dist: Distributed, log: Callable[[str], None]):
        self.dtype, self.deciding, self.dist, self.log = dtype, trial, dist, log
        self.updates = 0
        self.seconds = {candidate: 0.0 for candidate in CANDIDATES}
        self.tokens = {candidate: 0 for candidate in CANDIDATES}

    def current(self) -> torch.dtype | None:
        """The dtype the next update runs in."""
        return CANDIDATES[self.updates % 2] if self.deciding else self.dtype

    def record(self, seconds: float, tokens: int) -> bool:
        """Count an update of ``tokens`` that took ``seconds`` in ``current()``; True when that
        completes the trial and ``dtype`` is the choice from now on."""
        if not self.deciding:
            return False
        if self.updates >= 2 * WARMUP:
            ran = self.current()
            self.seconds[ran] += seconds
            self.tokens[ran] += tokens
        self.updates += 1
        if self.updates < 2 * (WARMUP + TIMED):
            return False
        self.deciding = False
        self.dtype = self._decide()
        return True

    def _decide(self) -> torch.dtype | None:
        rate = {dtype: self.tokens[dtype] / max(self.seconds[dtype], 1e-9) for dtype in CANDIDATES}
        bf16, fp32 = rate[torch.bfloat16], rate[None]
        votes = self.dist.sum(int(bf16 >= MARGIN * fp32))
        chosen = torch.bfloat16 if 2 * votes > self.dist.world_size else None
        self.log(
            f"train.amp auto: {TIMED} updates each trained {bf16:,.0f} tokens/s in bf16 and {fp32:,.0f} "
            f"in fp32 on this CPU; training on in {'bf16' if chosen else 'fp32'}"
        )
        return chosen
