"""The micro-batcher without HTTP or a model: a fake engine that records its calls.

The fake translates a line to its upper case (with the call's key after a "#" unless it is 0),
so every answer shows whose line it was and how it was decoded; a gate (a threading.Event)
holds the engine inside a call, to fill the queue behind it.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from mt_cli.serve.batcher import Batcher, Closed, EngineFailed, QueueFull


class FakeEngine:
    """Upper-cases lines; remembers each call and fails if two calls ever overlap."""

    def __init__(self, seconds: float = 0.0, fail_on: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.keys: list[int] = []  # each call's key
        self.seconds = seconds
        self.fail_on = fail_on
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self._busy = threading.Lock()

    def __call__(self, lines: list[str], key: int) -> list[str]:
        if not self._busy.acquire(blocking=False):
            raise AssertionError("the engine was called while another call ran")
        try:
            self.entered.set()
            self.gate.wait(5)
            self.calls.append(list(lines))
            self.keys.append(key)
            time.sleep(self.seconds)
            if self.fail_on in lines:
                raise RuntimeError("engine broke")
            return [_upper(line, key) for line in lines]
        finally:
            self._busy.release()


def _upper(line: str, key: int) -> str:
    return line.upper() if key == 0 else f"{line.upper()}#{key}"


def run(coroutine_function, *args):
    return asyncio.run(coroutine_function(*args))


async def _started(engine: FakeEngine, **settings) -> Batcher:
    options = {"max_queue": 100, "wait": 0.005, "batch_lines": 64} | settings
    batcher = Batcher(engine, **options)
    await batcher.start()
    return batcher


def test_concurrent_requests_share_one_engine_call_and_get_their_own_lines() -> None:
    async def scenario() -> None:
        engine = FakeEngine()
        batcher = await _started(engine, wait=0.05)
        requests = [[f"r{i} a", f"r{i} b"][: 1 + i % 2] for i in range(10)]
        answers = await asyncio.gather(*(batcher.translate(lines, 0) for lines in requests))
        await batcher.close()
        assert answers == [[line.upper() for line in lines] for lines in requests]
        assert len(engine.calls) == 1 and engine.calls[0] == [line for lines in requests for line in lines]
        assert batcher.stats.largest_batch == 10 and batcher.stats.lines == 15

    run(scenario)


def test_a_batch_holds_requests_of_one_key_and_each_key_gets_its_own_call() -> None:
    async def scenario() -> None:
        engine = FakeEngine()
        batcher = await _started(engine, wait=0.05)
        requests = [([f"r{i}"], i % 3) for i in range(9)]  # keys 0, 1, 2, 0, 1, 2, ...
        answers = await asyncio.gather(*(batcher.translate(lines, key) for lines, key in requests))
        await batcher.close()
        assert answers == [[_upper(lines[0], key)] for lines, key in requests]
        assert engine.keys == [0, 1, 2]  # the first request's key first, then the held ones in order
        assert engine.calls == [[f"r{i}" for i in range(key, 9, 3)] for key in range(3)]

    run(scenario)


def test_requests_held_for_another_key_start_the_next_batch_oldest_first() -> None:
    async def scenario() -> None:
        engine = FakeEngine(fail_on="boom")
        engine.gate.clear()  # the first call blocks while the others queue behind it
        batcher = await _started(engine, wait=0, max_queue=6)
        first = asyncio.ensure_future(batcher.translate(["first"], 0))
        while not engine.entered.is_set():
            await asyncio.sleep(0.001)
        queued = [("a", 1), ("b", 0), ("boom", 1), ("c", 0), ("d", 2)]
        later = [asyncio.ensure_future(batcher.translate([line], key)) for line, key in queued]
        await asyncio.sleep(0)
        assert batcher.queued_lines == 5
        with pytest.raises(QueueFull):  # held requests still count against the queue
            await batcher.translate(["x", "y"], 2)
        engine.gate.set()
        assert await first == ["FIRST"]
        results = await asyncio.gather(*later, return_exceptions=True)
        await batcher.close()
        assert results[0] == ["A#1"] and results[1] == ["B"] and results[3] == ["C"] and results[4] == ["D#2"]
        assert isinstance(results[2], EngineFailed)
        # Key 1's batch failed and was decoded again request by request, with key 1.
        assert engine.calls == [["first"], ["a", "boom"], ["a"], ["boom"], ["b", "c"], ["d"]]
        assert engine.keys == [0, 1, 1, 1, 0, 2]
        assert batcher.queued_lines == 0 and batcher.pending_requests == 0

    run(scenario)


def test_the_line_budget_closes_a_batch_and_the_engine_is_never_called_twice_at_once() -> None:
    async def scenario() -> None:
        engine = FakeEngine(seconds=0.01)
        batcher = await _started(engine, wait=0.05, batch_lines=4)
        requests = [[f"r{i}"] for i in range(12)]
        answers = await asyncio.gather(*(batcher.translate(lines, 0) for lines in requests))
        await batcher.close()
        assert answers == [[f"R{i}"] for i in range(12)]
        assert len(engine.calls) >= 3 and all(len(call) <= 4 for call in engine.calls)

    run(scenario)


def test_a_full_queue_refuses_what_does_not_fit_and_serves_the_rest() -> None:
    async def scenario() -> None:
        engine = FakeEngine()
        engine.gate.clear()  # the first call blocks, so later requests wait in the queue
        batcher = await _started(engine, max_queue=3, wait=0)
        first = asyncio.ensure_future(batcher.translate(["first"], 0))
        while not engine.entered.is_set():
            await asyncio.sleep(0.001)
        waiting = [asyncio.ensure_future(batcher.translate([f"w{i}"], 0)) for i in range(3)]
        await asyncio.sleep(0)
        with pytest.raises(QueueFull):
            await batcher.translate(["one too many"], 0)
        with pytest.raises(QueueFull):
            await batcher.translate(["a", "b"], 0)
        engine.gate.set()
        assert await first == ["FIRST"]
        assert await asyncio.gather(*waiting) == [[f"W{i}"] for i in range(3)]
        assert await batcher.translate(["again"], 0) == ["AGAIN"]  # the queue has room again
        await batcher.close()

    run(scenario)


def test_close_answers_every_accepted_request_then_refuses_new_ones() -> None:
    async def scenario() -> None:
        engine = FakeEngine(seconds=0.02)
        batcher = await _started(engine, batch_lines=2)
        accepted = [asyncio.ensure_future(batcher.translate([f"r{i}"], 0)) for i in range(8)]
        await asyncio.sleep(0)  # all eight are queued
        await batcher.close()
        assert all(task.done() for task in accepted)
        assert [task.result() for task in accepted] == [[f"R{i}"] for i in range(8)]
        with pytest.raises(Closed):
            await batcher.translate(["late"], 0)

    run(scenario)


def test_an_engine_failure_fails_only_the_request_at_fault_and_the_batcher_goes_on() -> None:
    async def scenario() -> None:
        engine = FakeEngine(fail_on="boom")
        batcher = await _started(engine, wait=0.05)
        requests = [["ok", "fine"], ["boom"], ["also ok"]]
        results = await asyncio.gather(
            *(batcher.translate(lines, 0) for lines in requests), return_exceptions=True
        )
        assert results[0] == ["OK", "FINE"] and results[2] == ["ALSO OK"]
        assert isinstance(results[1], EngineFailed) and isinstance(results[1].cause, RuntimeError)
        # One call for the batch, then each request alone: the failure stays with its request.
        assert engine.calls == [["ok", "fine", "boom", "also ok"], ["ok", "fine"], ["boom"], ["also ok"]]
        stats = batcher.stats
        assert (stats.retried_batches, stats.failed_requests, stats.requests, stats.lines) == (1, 1, 2, 3)
        assert await batcher.translate(["fine"], 0) == ["FINE"]
        await batcher.close()

    run(scenario)


def test_an_engine_that_drops_lines_fails_the_request_not_the_batcher() -> None:
    async def scenario() -> None:
        batcher = Batcher(lambda lines, key: lines[1:], max_queue=10, wait=0, batch_lines=8)
        await batcher.start()
        with pytest.raises(EngineFailed, match="returned 0 lines for 1"):
            await batcher.translate(["a"], 0)
        assert batcher.stats.failed_requests == 1 and batcher.queued_lines == 0
        await batcher.close()

    run(scenario)


def test_a_request_whose_client_left_is_not_decoded_and_frees_its_queue_place() -> None:
    async def scenario() -> None:
        engine = FakeEngine()
        engine.gate.clear()
        batcher = await _started(engine, wait=0, max_queue=4)
        first = asyncio.ensure_future(batcher.translate(["first"], 0))
        while not engine.entered.is_set():
            await asyncio.sleep(0.001)
        gone = asyncio.ensure_future(batcher.translate(["gone", "gone too", "and gone"], 0))
        kept = asyncio.ensure_future(batcher.translate(["kept"], 0))
        await asyncio.sleep(0)
        assert batcher.queued_lines == 4
        gone.cancel()
        await asyncio.sleep(0)
        assert batcher.queued_lines == 1  # its three places are free before its turn comes
        later = asyncio.ensure_future(batcher.translate(["x", "y", "z"], 0))
        engine.gate.set()
        assert await first == ["FIRST"] and await kept == ["KEPT"] and await later == ["X", "Y", "Z"]
        await batcher.close()
        assert engine.calls == [["first"], ["kept", "x", "y", "z"]]
        assert (batcher.stats.dropped_requests, batcher.stats.dropped_lines) == (1, 3)
        assert batcher.pending_requests == 0 and batcher.queued_lines == 0

    run(scenario)


def test_drain_answers_what_it_can_in_the_grace_period_and_closed_to_the_rest() -> None:
    async def scenario() -> None:
        engine = FakeEngine(seconds=0.3)
        batcher = await _started(engine, wait=0, batch_lines=1)
        requests = [asyncio.ensure_future(batcher.translate([f"r{i}"], 0)) for i in range(6)]
        while not engine.entered.is_set():
            await asyncio.sleep(0.001)
        batcher.drain(1.0)  # no decode seen yet: requests may start until 1.0 - 0.5 s
        with pytest.raises(Closed):
            await batcher.translate(["late"], 0)
        results = await asyncio.gather(*requests, return_exceptions=True)
        await batcher.close()
        answered = [result for result in results if isinstance(result, list)]
        assert answered == [[f"R{i}"] for i in range(len(answered))] and 2 <= len(answered) <= 3
        assert all(isinstance(result, Closed) for result in results[len(answered) :])
        assert engine.calls == [[f"r{i}"] for i in range(len(answered))]

    run(scenario)


def test_drain_answers_a_request_still_decoding_when_the_grace_period_ends() -> None:
    async def scenario() -> None:
        engine = FakeEngine(seconds=0.6)
        batcher = await _started(engine, wait=0)
        decoding = asyncio.ensure_future(batcher.translate(["slow"], 0))
        while not engine.entered.is_set():
            await asyncio.sleep(0.001)
        started = time.monotonic()
        batcher.drain(0.2)
        with pytest.raises(Closed):
            await decoding
        assert 0.15 < time.monotonic() - started < 0.5  # at the grace period, not the decode's end
        await batcher.close()  # waits for the engine call, which is never cut
        assert engine.calls == [["slow"]] and batcher.pending_requests == 0

    run(scenario)


class OverlapCounter:
    """Upper-cases lines slowly and records how many calls ran at once."""

    def __init__(self) -> None:
        self.active = self.most = 0
        self._lock = threading.Lock()

    def __call__(self, lines: list[str], key: int) -> list[str]:
        with self._lock:
            self.active += 1
            self.most = max(self.most, self.active)
        time.sleep(0.05)
        with self._lock:
            self.active -= 1
        return [line.upper() for line in lines]


def test_parallel_batches_decode_side_by_side_and_never_more() -> None:
    async def scenario() -> None:
        engine = OverlapCounter()
        batcher = Batcher(engine, max_queue=100, wait=0.001, batch_lines=2, parallel=2)
        await batcher.start()
        requests = [[f"r{i}"] for i in range(12)]
        answers = await asyncio.gather(*(batcher.translate(lines, 0) for lines in requests))
        await batcher.close()
        assert answers == [[f"R{i}"] for i in range(12)]
        assert engine.most == 2 and batcher.stats.lines == 12

    run(scenario)
