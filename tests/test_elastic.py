"""Training that survives losing a worker: two torchrun agents as two "nodes" on 127.0.0.1 (c10d
rendezvous, gloo, one process each, one restart allowed) train the tiny recipe; a worker killed
with SIGKILL mid-run is restarted with the same arguments, resumes from last.pt, and the run ends
with the weights and metrics of an uninterrupted one."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from helpers import FAST_TRAINING, end_group, processes_left, start_child, torchrun_train, wait_until

from mt_cli.checkpoint import Checkpoint

STEPS = 20  # past the first epoch's end (19 updates per rank) and its validation
KILL_AFTER = 6  # updates; last.pt is saved every 2
RECIPE = [
    *FAST_TRAINING,
    f"train.max_steps={STEPS}",
    "train.save_every_steps=2",
    "train.average_last=0",
    "train.device=cpu",
]
# torchrun's agents share one rendezvous store across restarts, and a restarted worker group can
# read the failed group's addresses from it (pytorch/pytorch#135712): a store per worker group.
ELASTIC_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
# What must be equal per logged update; times and rates differ.
SAME = {
    "train": ("event", "step", "epoch", "loss", "grad_norm", "lr"),
    "val": ("event", "step", "epoch", "loss"),
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_nodes(run_dir: Path) -> list[subprocess.Popen]:
    """Two torchrun agents, each a node of one worker, meeting at a c10d rendezvous."""
    port, nodes = free_port(), []
    for node in range(2):
        rendezvous = [
            "--nnodes=2",
            "--nproc-per-node=1",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{port}",
            f"--rdzv-id={run_dir.name}",
            f"--rdzv-conf=is_host={node == 0}",  # node 0 serves the rendezvous store
            "--local-addr=127.0.0.1",
            "--max-restarts=1",
        ]
        command = torchrun_train(rendezvous, run_dir, RECIPE)
        log = (run_dir.parent / f"{run_dir.name}.node{node}.log").open("w")
        env = {**os.environ, "OMP_NUM_THREADS": "1", **ELASTIC_ENV}
        nodes.append(start_child(command, stdout=log, stderr=subprocess.STDOUT, cwd="/", env=env))
    return nodes


def workers(nodes: list[subprocess.Popen]) -> dict[int, int]:
    """rank: pid of the training processes the agents run now (each in a session of its own)."""
    found = {}
    for node in nodes:
        for pid, command in processes_left(node.pid).items():
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except (FileNotFoundError, ProcessLookupError):
                continue  # ended meanwhile
            ranks = [entry[5:] for entry in environ if entry.startswith(b"RANK=")]
            if "mt_cli" in command and ranks:
                found[int(ranks[0])] = pid
    return found


def finish(nodes: list[subprocess.Popen], run_dir: Path) -> None:
    """Wait for both agents; each must end as a successful run ends."""
    for node in range(2):
        code = nodes[node].wait(timeout=240)
        log = (run_dir.parent / f"{run_dir.name}.node{node}.log").read_text(errors="replace")
        assert code == 0, log[-3000:]


def end_nodes(nodes: list[subprocess.Popen]) -> None:
    """Kill whatever is left of the agents: their workers (in sessions of their own), then the
    agents' groups."""
    for pid in workers(nodes).values():
        os.kill(pid, signal.SIGKILL)
    for node in nodes:
        end_group(node)


@pytest.fixture
def nodes_ended() -> Iterator[list[subprocess.Popen]]:
    """The agents a test starts (it appends them), ended with the test, passed or failed."""
    started: list[subprocess.Popen] = []
    yield started
    end_nodes(started)


def updates(run_dir: Path) -> list[dict]:
    """The logged events, one per (event, step): a resumed run repeats the updates after last.pt,
    and the later record of a step is the one the run went on from."""
    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    last = {(e["event"], e["step"]): {k: e[k] for k in SAME[e["event"]]} for e in events}
    return sorted(last.values(), key=lambda e: (e["step"], e["event"]))


def logged_step(run_dir: Path) -> int:
    try:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return 0
    return max((json.loads(line)["step"] for line in lines if line.endswith("}")), default=0)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fault-free two-node run, the reference."""
    run_dir = tmp_path_factory.mktemp("elastic") / "uninterrupted"
    nodes = start_nodes(run_dir)
    try:
        finish(nodes, run_dir)
    finally:
        end_nodes(nodes)
    return run_dir


def test_a_two_node_run_trains_to_its_end(uninterrupted: Path) -> None:
    saved = Checkpoint.load(uninterrupted / "checkpoints" / "last.pt")
    assert saved.progress is not None
    assert (saved.progress["step"], saved.progress["world_size"]) == (STEPS, 2)
    assert len(saved.rng["ranks"]) == 2  # each rank's dropout stream
    assert [e["step"] for e in updates(uninterrupted) if e["event"] == "train"] == list(range(1, STEPS + 1))
    assert "resumed from" not in (uninterrupted / "train.log").read_text()


def test_a_killed_worker_is_restarted_and_the_run_ends_as_an_uninterrupted_one(
    uninterrupted: Path, tmp_path: Path, nodes_ended: list[subprocess.Popen]
) -> None:
    run_dir = tmp_path / "killed"
    nodes_ended += start_nodes(run_dir)
    assert wait_until(lambda: logged_step(run_dir) >= KILL_AFTER, seconds=180), "no update 6"
    ranks = workers(nodes_ended)
    assert sorted(ranks) == [0, 1]
    # Rank 0 holds the run's lock and writes last.pt: the restarted group must take both over.
    os.kill(ranks[0], signal.SIGKILL)
    killed_at = logged_step(run_dir)
    finish(nodes_ended, run_dir)

    log = (run_dir / "train.log").read_text()
    assert killed_at < STEPS and "resumed from" in log, log[-2000:]
    assert updates(run_dir) == updates(uninterrupted)
    ours, theirs = (Checkpoint.load(run / "checkpoints" / "last.pt") for run in (run_dir, uninterrupted))
    assert ours.model.keys() == theirs.model.keys()
    for name, tensor in theirs.model.items():
        assert torch.equal(ours.model[name], tensor), name
    assert ours.progress == {**theirs.progress, "elapsed": ours.progress["elapsed"]}
