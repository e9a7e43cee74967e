"""DDP plumbing: one object that is a no-op in a single process and talks to the group under torchrun."""

from __future__ import annotations

import contextlib
import datetime
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as torch_dist
from torch import nn

from mt_cli.errors import ConfigError


def under_torchrun() -> bool:
    """Whether torchrun (its elastic agent, which sets TORCHELASTIC_RUN_ID in every worker) or
    another launcher of several processes (WORLD_SIZE > 1) started this one."""
    return "TORCHELASTIC_RUN_ID" in os.environ or int(os.environ.get("WORLD_SIZE", "1")) > 1


@dataclass(frozen=True)
class Distributed:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @classmethod
    def from_env(cls, device: torch.device, timeout_minutes: float) -> Distributed:
        """Join the process group that ``torchrun`` describes in the environment, if any.

        The backend follows the training device, not the machine: CPU training on a GPU machine
        needs gloo, since NCCL only reduces CUDA tensors. A collective that waits longer than
        ``timeout_minutes`` for the other ranks fails (``train.dist_timeout_minutes``), so that
        torchrun can restart a group whose rank hangs.
        """
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size == 1:
            return cls()
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if device.type == "cuda" and local_rank >= (gpus := torch.cuda.device_count()):
            raise ConfigError(
                f"torchrun started local rank {local_rank}, but only {gpus} CUDA GPU(s) are visible; "
                "start at most "
                f"{gpus} processes per node, or train on the CPU with --set train.device=cpu"
            )
        torch_dist.init_process_group(
            backend="nccl" if device.type == "cuda" else "gloo",
            timeout=datetime.timedelta(minutes=timeout_minutes),
        )
        return cls(torch_dist.get_rank(), world_size, local_rank)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1

    def device(self, device: torch.device) -> torch.device:
        if device.type == "cuda" and self.active:
            torch.cuda.set_device(self.local_rank)
            return torch.device("cuda", self.local_rank)
        return device

    def wrap(self, model: nn.Module) -> nn.Module:
        if not self.active:
            return model
        device_ids = [self.local_rank] if next(model.parameters()).is_cuda else None
        return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)

    def no_sync(self, module: nn.Module) -> contextlib.AbstractContextManager:
        """Skip the gradient all-reduce for all but the last batch of an accumulated update."""
        if isinstance(module, nn.parallel.DistributedDataParallel):
            return module.no_sync()
        return contextlib.nullcontext()

    def sum(self, value: int) -> int:
        if not self.active:
            return value
        tensor = torch.tensor([value], dtype=torch.long, device=self._collective_device())
        torch_dist.all_reduce(tensor)
        return int(tensor.item())

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed over the ranks, in place, on its device: nothing waits for the result."""
        if self.active:
            torch_dist.all_reduce(tensor)
        return tensor

    def agree(self, reason: str | None) -> str | None:
        """Stop on every rank when any rank has a reason to (signals, time, patience)."""
        if not self.active:
            return reason
        if self.sum(int(reason is not None)) == 0:
            return None
        return reason or "another rank stopped"

    def gather(self, value: Any) -> list[Any] | None:
        """Every rank's ``value`` (picklable), in rank order, on rank 0; None on the others."""
        if not self.active:
            return [value]
        values: list[Any] | None = [None] * self.world_size if self.is_main else None
        torch_dist.gather_object(value, values, dst=0)
        return values

    def barrier(self) -> None:
        if self.active:
            torch_dist.barrier()

    def close(self) -> None:
        if self.active and torch_dist.is_initialized():
            torch_dist.destroy_process_group()

    def _collective_device(self) -> torch.device:
        return (
            torch.device("cuda", self.local_rank)
            if torch_dist.get_backend() == "nccl"
            else torch.device("cpu")
        )
