"""The batcher without HTTP or a model: a fake engine that records its calls.

The fake translates a line to its upper case (with the call's key after a "#" unless it is 0),
so every answer shows whose line it was and how it was decoded; a gate (a threading.Event)
holds the engine inside a call, to fill the queue behind it. A line's pieces are its words.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from mt_cli.serve.batcher import Batcher
from mt_cli.serve.decoders import EngineFailed, InProcess, WorkerDied
from mt_cli.serve.errors import Closed, Late, QueueFull


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


def words(lines: list[str]) -> list[int]:
    return [len(line.split()) for line in lines]


async def _started(engine, parallel: int = 1, **settings) -> Batcher:
    options = {"max_queue": 100, "max_queue_pieces": 1000, "batch_pieces": 64, "deadline": 30.0} | settings
    batcher = Batcher(InProcess(engine, parallel), words, **options)
    await batcher.start()
    return batcher


async def _busy(engine: FakeEngine, batcher: Batcher) -> asyncio.Future:
    """A first request the gated engine holds, so that what follows waits behind it."""
    engine.gate.clear()
    engine.entered.clear()
    first = asyncio.ensure_future(batcher.translate(["first"], 0))
    while not engine.entered.is_set():
        await asyncio.sleep(0.001)
    return first


def test_a_free_decoder_takes_everything_waiting_and_no_timer_holds_a_lone_request() -> None:
    async def scenario() -> None:
        engine = FakeEngine()
        batcher = await _started(engine)
        assert await batcher.translate(["alone"], 0) == ["ALONE"]  # decoded at once, by itself
        first = await _busy(engine, batcher)
        requests = [[f"r{i} a", f"r{i} b"][: 1 + i % 2] for i in range(10)]
        waiting = [asyncio.ensure_future(batcher.translate(lines, 0)) for lines in requests]
        await asyncio.sleep(0)
        engine.gate.set()
        assert await first == ["FIRST"]
        assert await asyncio.gather(*waiting) == [[line.upper() for line in lines] for lines in requests]
        await batcher.close()
        assert engine.calls == [["alone"], ["first"], [line for lines in requests for line in lines]]
        assert batcher.stats.largest_batch == 15 and batcher.stats.lines == 17

    run(scenario)


def test_a_batch_holds_one_key_and_the_oldest_waiting_sentence_chooses_it() -> None:
    async def scenario() -> None:
        engine = FakeEngine()
        batcher = await _started(engine)
        first = await _busy(engine, batcher)
        requests = [([f"r{i}"], i % 3) for i in range(9)]  # keys 0, 1, 2, 0, 1, 2, ...
        waiting = [asyncio.ensure_future(batcher.translate(lines, key)) for lines, key in requests]
        await asyncio.sleep(0)
        engine.gate.set()
        await first
        assert await asyncio.gather(*waiting) == [[_upper(lines[0], key)] for lines, key in requests]
        await batcher.close()
        assert engine.keys == [0, 0, 1, 2]
        assert engine.calls[1:] == [[f"r{i}" for i in range(key, 9, 3)] for key in range(3)]

    run(scenario)


def test_the_piece_budget_closes_a_batch_with_sentences_of_the_oldest_ones_length() -> None:
    async def scenario() -> None:
        engine = FakeEngine()
        batcher = await _started(engine, batch_pieces=6)
        first = await _busy(engine, batcher)
        lines = ["a", "b b b b b", "c", "d d d d d", "e e"]
        waiting = [asyncio.ensure_future(batcher.translate([line], 0)) for line in lines]
        await asyncio.sleep(0)
        engine.gate.set()
        await first
        assert await asyncio.gather(*waiting) == [[line.upper()] for line in lines]
        await batcher.close()
        # "a" is the oldest: then the nearest in length while they fit 6 pieces
        assert engine.calls[1:] == [["a", "c", "e e"], ["b b b b b"], ["d d d d d"]]

    run(scenario)


def test_a_full_queue_refuses_by_sentences_and_by_pieces_and_says_when_to_retry() -> None:
    async def scenario() -> None:
        engine = FakeEngine()
        batcher = await _started(engine, max_queue=3, max_queue_pieces=5)
        first = await _busy(engine, batcher)
        waiting = [asyncio.ensure_future(batcher.translate([f"w{i}"], 0)) for i in range(3)]
        await asyncio.sleep(0)
        with pytest.raises(QueueFull) as full:
            await batcher.translate(["one too many"], 0)
        assert full.value.retry_after == 1  # nothing measured yet
        engine.gate.set()
        await first
        assert await asyncio.gather(*waiting) == [[f"W{i}"] for i in range(3)]
        first = await _busy(engine, batcher)
        long = asyncio.ensure_future(batcher.translate(["a b c d"], 0))
        await asyncio.sleep(0)
        with pytest.raises(QueueFull, match="4 pieces"):
            await batcher.translate(["e f"], 0)  # 6 pieces would wait: over 5
        engine.gate.set()
        assert await first == ["FIRST"] and await long == ["A B C D"]
        assert await batcher.translate(["again"], 0) == ["AGAIN"]  # the queue has room again
        await batcher.close()

    run(scenario)


def test_retry_after_is_the_pieces_waiting_over_the_rate_measured() -> None:
    async def scenario() -> None:
        engine = FakeEngine(seconds=0.1)
        batcher = await _started(engine)
        await batcher.translate(["one two three four five six seven eight nine ten"], 0)  # ~100 pieces/s
        first = await _busy(engine, batcher)
        waiting = asyncio.ensure_future(batcher.translate([" ".join(["w"] * 300)], 0))
        await asyncio.sleep(0)
        # 300 pieces at 100/s at best: 3 s, more on a machine slower than the 0.1 s sleep
        assert 3 <= batcher.retry_after() <= 60
        engine.gate.set()
        await first, await waiting
        await batcher.close()

    run(scenario)


def test_a_repeated_sentence_is_answered_from_the_cache_and_a_shared_one_decoded_once() -> None:
    async def scenario() -> None:
        engine = FakeEngine()
        batcher = await _started(engine, cache_size=2)
        first = await _busy(engine, batcher)
        both = [asyncio.ensure_future(batcher.translate(["same", "other", "same"], 0)) for _ in range(2)]
        await asyncio.sleep(0)
        assert batcher.queued_lines == 2  # "same" and "other", once each
        engine.gate.set()
        await first
        assert [await task for task in both] == [["SAME", "OTHER", "SAME"]] * 2
        assert await batcher.translate(["other", "same"], 0) == ["OTHER", "SAME"]
        assert await batcher.translate(["same"], 1) == ["SAME#1"]  # another key: decoded
        await batcher.close()
        assert engine.calls == [["first"], ["same", "other"], ["same"]]
        assert (batcher.cache.hits, len(batcher.cache)) == (2, 2)

    run(scenario)


def test_a_request_past_its_deadline_is_answered_late_and_not_decoded() -> None:
    async def scenario() -> None:
        engine = FakeEngine()
        batcher = await _started(engine, deadline=0.05)
        first = await _busy(engine, batcher)
        late = asyncio.ensure_future(batcher.translate(["late"], 0))
        await asyncio.sleep(0.1)
        engine.gate.set()
        assert await first == ["FIRST"]
        with pytest.raises(Late, match="within 0.05 s"):
            await late
        await batcher.close()
        assert engine.calls == [["first"]] and batcher.stats.late_requests == 1

    run(scenario)


def test_close_answers_every_accepted_request_then_refuses_new_ones() -> None:
    async def scenario() -> None:
        engine = FakeEngine(seconds=0.02)
        batcher = await _started(engine, batch_pieces=2)
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
        batcher = await _started(engine)
        first = await _busy(engine, batcher)
        requests = [["ok", "fine"], ["boom"], ["also ok"]]
        tasks = [asyncio.ensure_future(batcher.translate(lines, 0)) for lines in requests]
        await asyncio.sleep(0)
        engine.gate.set()
        await first
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert results[0] == ["OK", "FINE"] and results[2] == ["ALSO OK"]
        assert isinstance(results[1], EngineFailed) and isinstance(results[1].cause, RuntimeError)
        # One call for the batch, then each sentence alone: the failure stays with its request.
        assert engine.calls[1:] == [
            ["ok", "fine", "boom", "also ok"],
            ["ok"],
            ["fine"],
            ["boom"],
            ["also ok"],
        ]
        stats = batcher.stats
        assert (stats.retried_batches, stats.failed_requests, stats.requests) == (1, 1, 3)
        assert await batcher.translate(["fine"], 0) == ["FINE"]
        await batcher.close()

    run(scenario)


def test_a_batch_whose_workers_died_fails_at_once_not_sentence_by_sentence() -> None:
    calls: list[list[str]] = []

    def dying(lines: list[str], key: int) -> list[str]:
        calls.append(lines)
        raise WorkerDied("two decoding workers died")

    async def scenario() -> None:
        batcher = await _started(dying)
        results = await asyncio.gather(
            batcher.translate(["a"], 0), batcher.translate(["b"], 0), return_exceptions=True
        )
        assert all(isinstance(result, EngineFailed) for result in results)
        await batcher.close()

    run(scenario)
    assert len(calls) <= 2 and sorted(line for call in calls for line in call) == ["a", "b"]


def test_an_engine_that_drops_lines_fails_the_request_not_the_batcher() -> None:
    async def scenario() -> None:
        batcher = await _started(lambda lines, key: lines[1:])
        with pytest.raises(EngineFailed, match="returned 0 lines for 1"):
            await batcher.translate(["a"], 0)
        assert batcher.stats.failed_requests == 1 and batcher.queued_lines == 0
        await batcher.close()

    run(scenario)


def test_a_request_whose_client_left_is_not_decoded_and_frees_its_queue_place() -> None:
    async def scenario() -> None:
        engine = FakeEngine()
        batcher = await _started(engine, max_queue=4)
        first = await _busy(engine, batcher)
        gone = asyncio.ensure_future(batcher.translate(["gone", "gone too", "and gone"], 0))
        kept = asyncio.ensure_future(batcher.translate(["kept", "gone"], 0))
        await asyncio.sleep(0)
        assert batcher.queued_lines == 4
        gone.cancel()
        await asyncio.sleep(0)
        assert batcher.queued_lines == 2  # "gone" stays: "kept"'s request wants it too
        later = asyncio.ensure_future(batcher.translate(["x", "y"], 0))
        engine.gate.set()
        assert await first == ["FIRST"] and await kept == ["KEPT", "GONE"] and await later == ["X", "Y"]
        await batcher.close()
        assert engine.calls == [["first"], ["gone", "kept", "x", "y"]]
        assert batcher.stats.dropped_requests == 1
        assert batcher.pending_requests == 0 and batcher.queued_lines == 0

    run(scenario)


def test_drain_answers_what_it_can_in_the_grace_period_and_closed_to_the_rest() -> None:
    async def scenario() -> None:
        engine = FakeEngine(seconds=0.3)
        batcher = await _started(engine, batch_pieces=1)
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
        batcher = await _started(engine)
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


def test_parallel_decoders_decode_side_by_side_and_never_more() -> None:
    async def scenario() -> None:
        engine = OverlapCounter()
        batcher = await _started(engine, parallel=2, batch_pieces=2)
        requests = [[f"r{i}"] for i in range(12)]
        answers = await asyncio.gather(*(batcher.translate(lines, 0) for lines in requests))
        await batcher.close()
        assert answers == [[f"R{i}"] for i in range(12)]
        assert engine.most == 2 and batcher.stats.lines == 12

    run(scenario)


def test_what_the_engine_warns_of_is_logged_and_counted_once_when_decoded(caplog) -> None:
    async def scenario() -> None:
        engine = FakeEngine()
        said = {"LONG LINE": ("cut to the model's positions",)}
        options = {"max_queue": 100, "max_queue_pieces": 1000, "batch_pieces": 64, "deadline": 30.0}
        batcher = Batcher(
            InProcess(engine, 1), words, **options, cache_size=4, warnings=lambda r: said.get(r, ())
        )
        await batcher.start()
        assert await batcher.translate(["long line", "short"], 0) == ["LONG LINE", "SHORT"]
        assert await batcher.translate(["long line"], 0) == ["LONG LINE"]  # from the cache
        await batcher.close()
        assert batcher.stats.warned_lines == 1

    with caplog.at_level("WARNING", logger="mt.serve"):
        run(scenario)
    assert [r.getMessage() for r in caplog.records] == [
        "mt serve: a sentence of 9 characters: cut to the model's positions"
    ]
