"""What an update leaves on the device (its batches' summed losses, the gradient norm, whether
the gradient was finite), brought to the host without stopping the device.

Reading a CUDA tensor with ``.item()`` waits for every kernel queued before the read, so a read
per update leaves the GPU idle while the host prepares the next one. An ``UpdateOutcome``
instead queues one small copy into pinned host memory behind the update's own kernels and
records an event; ``read`` waits for that event only. The trainer reads an update's outcome
after queueing the next update's forward and backward passes (or at once where the step
count decides something: a log line, a checkpoint, a validation, the end), so the device always
has work queued while the host waits. On the CPU the copy is the tensor itself and nothing waits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Settled:
    """An update's outcome on the host."""

    loss: float  # per real target token of this rank's batches
    grad_norm: float  # before clipping; inf or nan when the update was skipped
    applied: bool  # False: a non-finite gradient, and the optimizer left the weights alone


class UpdateOutcome:
    """One update's ``(loss of each batch..., grad norm)``, on its way to the host."""

    def __init__(self, batch_losses: list[torch.Tensor], grad_norm: torch.Tensor, target_tokens: int) -> None:
        stats = torch.stack([*batch_losses, grad_norm]).float()  # (accum + 1,)
        self.target_tokens = target_tokens
        self._ready: torch.cuda.Event | None = None
        if stats.is_cuda:
            self._host = torch.empty(stats.shape, dtype=stats.dtype, pin_memory=True)
            self._host.copy_(stats, non_blocking=True)
            self._ready = torch.cuda.Event()
            self._ready.record()
        else:
            self._host = stats

    def read(self) -> Settled:
        """Wait for this update's copy (not for what was queued after it) and unpack it."""
        if self._ready is not None:
            self._ready.synchronize()
        *losses, norm = self._host.tolist()
        # Summed in Python, in batch order, as float64: the same value whatever the device.
        return Settled(sum(losses) / max(self.target_tokens, 1), norm, math.isfinite(norm))
