"""Decoding worker processes (``serve.workers``) with a stand-in decode function: real forks,
real sockets, real SIGKILLs."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mt_cli.serve.decoders import WorkerDied
from mt_cli.serve.workers import WorkerPool


def upper_with_pid(lines: list[str], key: int) -> list[str]:
    if "boom" in lines:
        raise ValueError("the engine broke\non two lines")
    if "slow" in lines:
        started = time.time()
        if isinstance(key, str) and not os.path.isdir(key):  # a file to say which worker has the batch
            with open(key, "w") as marker:
                marker.write(str(os.getpid()))
        time.sleep(1.0)
        if isinstance(key, str) and os.path.isdir(key):  # a folder to say when each worker decoded
            with open(os.path.join(key, str(os.getpid())), "w") as span:
                span.write(f"{started} {time.time()}")
    if "die" in lines:
        os._exit(3)
    return [f"{line.upper()}#{key}@{os.getpid()}" for line in lines]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is not alive
        return stat.read().split(")")[-1].split()[0] != "Z"


@pytest.fixture
def pool():
    workers = WorkerPool(upper_with_pid, 2)
    yield workers
    workers.close()


def test_each_worker_is_its_own_process_and_both_decode_side_by_side(pool: WorkerPool, tmp_path) -> None:
    assert len(set(pool.pids)) == 2 and os.getpid() not in pool.pids
    with ThreadPoolExecutor(2) as threads:
        slow = [threads.submit(pool.decode, ["slow"], str(tmp_path)) for _ in range(2)]
        answers = [future.result() for future in slow]
    assert sorted(answer[0].split("@")[1] for answer in answers) == sorted(str(pid) for pid in pool.pids)
    (a_start, a_end), (b_start, b_end) = [
        map(float, (tmp_path / str(pid)).read_text().split()) for pid in pool.pids
    ]
    assert a_start < b_end and b_start < a_end  # the two batches overlapped: side by side
    assert pool.decode(["a", "b"], 7)[0].startswith("A#7@")


def test_an_engine_error_is_one_line_and_the_worker_lives_on(pool: WorkerPool) -> None:
    pids = list(pool.pids)
    with pytest.raises(RuntimeError, match=r"^ValueError: the engine broke on two lines$"):
        pool.decode(["boom"], 0)
    assert pool.pids == pids and pool.restarts == 0
    assert pool.decode(["x"], 0)[0].startswith("X#0@")


def test_a_worker_killed_mid_batch_is_replaced_and_its_batch_decoded_by_the_new_one(
    pool: WorkerPool, tmp_path
) -> None:
    before = list(pool.pids)
    marker = tmp_path / "busy"
    result: list[list[str]] = []
    thread = threading.Thread(target=lambda: result.append(pool.decode(["slow"], str(marker))))
    thread.start()
    deadline = time.monotonic() + 10
    while not marker.exists() or not marker.read_text():
        assert time.monotonic() < deadline, "no worker took the batch"
        time.sleep(0.01)
    busy = int(marker.read_text())
    marker.unlink()
    os.kill(busy, signal.SIGKILL)
    thread.join(10)
    assert len(result) == 1 and result[0][0].startswith(f"SLOW#{marker}@")
    assert busy in before
    assert pool.restarts == 1 and len(set(pool.pids) - set(before)) == 1
    assert int(result[0][0].split("@")[1]) in pool.pids and int(result[0][0].split("@")[1]) not in before


def test_a_batch_that_kills_two_workers_fails_with_worker_died(pool: WorkerPool) -> None:
    with pytest.raises(WorkerDied, match="two decoding workers died"):
        pool.decode(["die"], 0)
    assert pool.restarts == 2 and all(_alive(pid) for pid in pool.pids)
    assert pool.decode(["fine"], 0)[0].startswith("FINE#0@")


def test_close_ends_the_workers_and_the_spawner() -> None:
    pool = WorkerPool(upper_with_pid, 2)
    pids = list(pool.pids)
    pool.decode(["warm"], 0)
    pool.close()
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in pids)
