"""Joining a torchrun group: the backend follows the training device, and too few GPUs is a config error."""

from __future__ import annotations

import datetime

import pytest
import torch

from mt_cli.errors import ConfigError
from mt_cli.runtime import distributed
from mt_cli.runtime.distributed import Distributed

timeouts: list[datetime.timedelta] = []  # what the last test's group was given


@pytest.fixture
def torchrun_env(monkeypatch):
    """A second local process of a two-process torchrun on a machine with one GPU."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    backends: list[str] = []
    timeouts.clear()

    def init_process_group(backend: str, timeout: datetime.timedelta) -> None:
        backends.append(backend)
        timeouts.append(timeout)

    monkeypatch.setattr(distributed.torch_dist, "init_process_group", init_process_group)
    monkeypatch.setattr(distributed.torch_dist, "get_rank", lambda: 1)
    return backends


def test_a_single_process_joins_no_group(monkeypatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert Distributed.from_env(torch.device("cuda"), 30) == Distributed()


def test_cpu_training_uses_gloo_even_where_a_gpu_is_present(torchrun_env) -> None:
    dist = Distributed.from_env(torch.device("cpu"), 2.5)
    assert torchrun_env == ["gloo"]
    assert timeouts == [datetime.timedelta(minutes=2.5)]  # train.dist_timeout_minutes
    assert (dist.rank, dist.world_size, dist.local_rank) == (1, 2, 1)
    assert dist.device(torch.device("cpu")) == torch.device("cpu")


def test_more_local_processes_than_gpus_is_a_config_error(torchrun_env) -> None:
    with pytest.raises(ConfigError, match="only 1 CUDA GPU.*train.device=cpu"):
        Distributed.from_env(torch.device("cuda"), 30)
    assert torchrun_env == []  # refused before joining a group the other ranks would wait on


def test_gpu_training_uses_nccl(torchrun_env, monkeypatch) -> None:
    monkeypatch.setenv("LOCAL_RANK", "0")
    Distributed.from_env(torch.device("cuda"), 30)
    assert torchrun_env == ["nccl"]


def test_torchrun_sets_the_elastic_run_id_in_every_worker(monkeypatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert not distributed.under_torchrun()
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "run-1")  # a one-process torchrun is torchrun too
    assert distributed.under_torchrun()
    monkeypatch.delenv("TORCHELASTIC_RUN_ID")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert distributed.under_torchrun()
