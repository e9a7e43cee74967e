"""The batcher: every request's sentences pooled, each free decoder handed what is waiting.

A request's sentences are looked up in the sentence cache (``cache``); the rest join the pool of
waiting sentences, one entry per distinct (key, sentence), so a sentence that several requests
send at once is decoded once. The key is the decode settings a sentence needs (``mt serve``: the
options of its request): one engine call decodes with one setting.

Work-conserving, as Bergamot's server batches: whenever one of the ``parallel`` decoders is
free and anything waits, it takes the oldest waiting sentence and more of its key, all of them if
they fit ``batch_pieces`` source pieces, else the ones nearest to it in length, so a batch pads
little. A request that finds every decoder idle is decoded at once. Only while another decoder
is busy does a free one wait a moment (``_settle``) for the clients it has just answered, whose
next requests arrive some milliseconds later: taking the first of them alone would make batches
a fraction of the size. Under heavy load the batches grow to the budget.

The pool is bounded in sentences and in pieces (``QueueFull`` past either, the server's 429, with
the seconds after which to retry from the pieces waiting and the rate measured so far). A request
still waiting ``deadline`` seconds after it came is answered ``Late`` (503), not decoded. A request
whose caller stopped waiting (the client hung up: its task was cancelled) leaves the pool at once.

What the engine warns of a sentence it decoded (``warnings``: placeholders mended, a source cut to
the model's positions) is logged once, when it is decoded, and counted (``Stats.warned_lines``).

One request's text never fails another's: if a batch's call raises, each of its sentences is
decoded again alone, and only the requests whose sentence still fails get the error
(``EngineFailed``); a decoder that died twice (``decoders.WorkerDied``) fails its batch at once.

``drain(grace)`` refuses new work and answers what waits as long as it can start decoding within
the grace period (less the longest decode seen); the rest, and anything unanswered when the grace
period ends, is answered ``Closed``. ``close()`` waits until every accepted request is answered.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from mt_cli.serve.cache import SentenceCache
from mt_cli.serve.decoders import Decoders, EngineFailed, WorkerDied
from mt_cli.serve.errors import Closed, Late, QueueFull
from mt_cli.serve.pool import Pending, Pooled, SentencePool

K = TypeVar("K", bound=Hashable)  # a batch's decode settings
R = TypeVar("R")  # what the engine gives for one line
Measure = Callable[[list[str]], list[int]]  # sentences -> their source pieces
logger = logging.getLogger("mt.serve")
DRAIN_MARGIN_S = 0.5  # kept free at the end of a grace period beyond the longest decode seen
RATE_BATCHES = 32  # recent batches the decoding rate is measured over
RETRY_AFTER_MAX_S = 60
SETTLE_SHARE = 0.25  # and at most this share of a typical batch's decoding time


@dataclass
class Stats:
    """What the decoders have done so far: for /health, /metrics and the tests."""

    batches: int = 0
    requests: int = 0  # requests answered in full
    lines: int = 0  # sentences decoded (a cache hit or a shared sentence is not decoded again)
    pieces: int = 0  # their source pieces
    largest_batch: int = 0  # the most sentences one engine call decoded
    longest_decode_s: float = 0.0  # the slowest engine call, what a stop must leave time for
    retried_batches: int = 0  # batches that failed and were decoded again sentence by sentence
    failed_requests: int = 0  # requests the engine failed on even alone
    dropped_requests: int = 0  # requests whose client left before they were answered
    late_requests: int = 0  # requests answered Late: the deadline passed before their decoding
    warned_lines: int = 0  # sentences the engine warned of as it decoded them (each logged)


class Batcher(Generic[K, R]):
    """Pools the sentences of concurrent ``translate`` calls and decodes them on ``decoders``."""

    def __init__(
        self,
        decoders: Decoders[K, R],
        measure: Measure,
        max_queue: int,
        max_queue_pieces: int,
        batch_pieces: int,
        deadline: float,
        cache_size: int = 0,
        warnings: Callable[[R], Sequence[str]] = lambda result: (),
    ) -> None:
        """``warnings``: what the engine said of a line, from its result."""
        if min(max_queue, max_queue_pieces, batch_pieces) < 1 or deadline <= 0:
            raise ValueError("the queue's bounds, the batch budget and the deadline must be positive")
        self.decoders = decoders
        self._measure = measure
        self._deadline = deadline
        self._warnings = warnings
        self.pool: SentencePool[K, R] = SentencePool(max_queue, max_queue_pieces, batch_pieces, cache_size)
        self._unanswered: set[Pending[R]] = set()
        self.stats = Stats()
        self.on_batch: list[Callable[[int, int, float], None]] = []  # (sentences, pieces, seconds)
        self._recent: deque[tuple[int, float]] = deque(maxlen=RATE_BATCHES)  # (pieces, seconds)
        self._concurrency: deque[int] = deque([0], maxlen=RATE_BATCHES)  # requests unanswered at each
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._deadlines: list[asyncio.TimerHandle] = []

    @property
    def cache(self) -> SentenceCache[K, R]:
        return self.pool.cache

    @property
    def queued_lines(self) -> int:
        """Distinct sentences waiting for a decoder."""
        return len(self.pool.waiting)

    @property
    def queued_pieces(self) -> int:
        return self.pool.waiting_pieces

    @property
    def pending_requests(self) -> int:
        return len(self._unanswered)

    async def start(self) -> None:
        """Start the dispatching task on the running loop (the server's, in its startup)."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="mt-batcher")

    async def translate(self, lines: list[str], key: K) -> list[R]:
        """The results for ``lines`` decoded with ``key``, in order. Cancelling the call (a
        client that left) takes its sentences out of the pool."""
        if self._closing or self._task is None:
            raise Closed("the server is stopping")
        loop = asyncio.get_running_loop()
        request: Pending[R] = Pending([None] * len(lines), loop.create_future(), loop.time() + self._deadline)
        found = self.pool.look_up(request, lines, key)
        pieces = self._measure(list(found.fresh)) if found.fresh else []
        if not self.pool.has_room(len(found.fresh), sum(pieces)):
            waiting = f"{self.queued_lines} sentences, {self.queued_pieces} pieces"
            raise QueueFull(f"the queue is full ({waiting} waiting); retry shortly", self.retry_after())
        self.pool.add(request, key, found, pieces)
        if request.missing == 0:
            self.stats.requests += 1
            return request.results  # type: ignore[return-value]  # every one filled in
        self._unanswered.add(request)
        request.future.add_done_callback(lambda _: self._forget(request))
        self._wakeup.set()
        return await request.future

    def retry_after(self) -> int:
        """Seconds until the pieces waiting now are decoded at the rate measured (1 at least)."""
        pieces = sum(count for count, _ in self._recent)
        seconds = sum(spent for _, spent in self._recent)
        if pieces == 0 or seconds <= 0:
            return 1
        rate = pieces / seconds * self.decoders.parallel
        return max(1, min(RETRY_AFTER_MAX_S, math.ceil(self.queued_pieces / rate)))

    def drain(self, grace: float) -> None:
        """Take no new requests; answer those that can start decoding within ``grace`` seconds
        less the longest decode seen, and ``Closed`` to the rest when that time is up, and to any
        still unanswered when ``grace`` is up."""
        self._closing = True
        if not self._deadlines:
            loop = asyncio.get_running_loop()
            last_start = max(0.0, grace - self.stats.longest_decode_s - DRAIN_MARGIN_S)
            self._deadlines = [
                loop.call_later(last_start, self._expire_waiting),
                loop.call_later(grace, self._expire, self._unanswered),
            ]

    async def close(self) -> None:
        """Take no new requests, answer every accepted one, then stop the task."""
        self._closing = True
        while self._unanswered or self.pool.decoding:
            self._idle.clear()
            await self._idle.wait()
        for deadline in self._deadlines:
            deadline.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _expire_waiting(self) -> None:
        self._expire(self.pool.waiting_requests())

    def _expire(self, requests: set[Pending[R]]) -> None:
        for request in list(requests):
            if not request.future.done():
                request.future.set_exception(
                    Closed("the server is stopping and could not decode this in time")
                )
                self._forget(request)  # now, not when the future's callbacks run

    def _forget(self, request: Pending[R]) -> None:
        """The request is answered (or its client left): its waiting sentences no one else wants
        leave the pool. Called again for one already forgotten, it does nothing."""
        if request not in self._unanswered:
            return
        self._unanswered.discard(request)
        if request.future.cancelled():
            self.stats.dropped_requests += 1
        self.pool.forget(request)
        if not self._unanswered and not self.pool.decoding:
            self._idle.set()

    async def _run(self) -> None:
        """Hand what waits to each decoder as it frees up."""
        slots = asyncio.Semaphore(self.decoders.parallel)
        decoding: set[asyncio.Task[None]] = set()
        while True:
            await slots.acquire()
            batch = await self._take()
            task = asyncio.get_running_loop().create_task(self._decode_then_release(batch, slots))
            decoding.add(task)  # held until done: the loop keeps only weak references to tasks
            task.add_done_callback(decoding.discard)

    async def _take(self) -> list[Pooled[K, R]]:
        """The next batch (``SentencePool.take``), once anything waits and, while another decoder
        is busy, has settled; requests past their deadline answered Late first."""
        while True:
            self._answer_late()
            if self.pool.waiting:
                break
            self._wakeup.clear()
            await self._wakeup.wait()
        if self.pool.decoding:
            await self._settle()
            self._answer_late()
        return self.pool.take()

    async def _settle(self) -> None:
        """While another decoder is busy, wait a moment for the clients this decoder just answered:
        they send their next requests some milliseconds later, and a free decoder that took the
        first of them alone would decode batches a fraction of the size, each sentence at a
        fraction of the speed (scripts/serve-vs-offline.py: 8.6 sentences a batch for 32 clients
        on 2 workers). It waits until as many sentences wait as the recent concurrency leaves to
        it (the most requests seen unanswered lately, less those decoding), at most SETTLE_SHARE
        of a typical batch's time; never when every decoder is idle, so a lone request is decoded
        at once."""
        if not self._recent:
            return
        loop = asyncio.get_running_loop()
        typical = sorted(spent for _, spent in self._recent)[len(self._recent) // 2]
        deadline = loop.time() + SETTLE_SHARE * typical
        wanted = max(self._concurrency) - self.pool.decoding_requests()
        while (
            self.pool.decoding and self.queued_lines < wanted and self.queued_pieces < self.pool.batch_pieces
        ):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), remaining)
            except asyncio.TimeoutError:  # not the builtin before Python 3.11
                return

    def _answer_late(self) -> None:
        now = asyncio.get_running_loop().time()
        late = {
            request
            for request in self.pool.waiting_requests()
            if request.deadline <= now and not request.future.done()
        }
        for request in late:
            self.stats.late_requests += 1
            waited = f"the server could not start decoding this within {self._deadline:g} s; retry later"
            request.future.set_exception(Late(waited, self.retry_after()))
            self._forget(request)  # now, not when the future's callbacks run: this batch must not take it

    async def _decode_then_release(self, batch: list[Pooled[K, R]], slots: asyncio.Semaphore) -> None:
        try:
            await self._decode(batch)
        finally:
            slots.release()
            self.pool.decoded(batch)
            if not self._unanswered and not self.pool.decoding:
                self._idle.set()

    async def _decode(self, batch: list[Pooled[K, R]]) -> None:
        """One engine call for the batch; on failure each sentence alone, so the error reaches
        only the requests at fault."""
        try:
            results = await self._call(batch)
        except EngineFailed as err:
            if len(batch) == 1 or isinstance(err.cause, WorkerDied):
                for sentence in batch:
                    self._fail(sentence, err)
                return
            self.stats.retried_batches += 1
            for sentence in batch:
                try:
                    [result] = await self._call([sentence])
                except EngineFailed as failure:
                    self._fail(sentence, failure)
                else:
                    self._answer(sentence, result)
            return
        for sentence, result in zip(batch, results, strict=True):
            self._answer(sentence, result)

    async def _call(self, batch: Sequence[Pooled[K, R]]) -> list[R]:
        """The decoders' results for the batch (in an executor thread), or ``EngineFailed``."""
        lines = [sentence.text for sentence in batch]
        pieces = sum(sentence.pieces for sentence in batch)
        started = time.monotonic()
        try:
            results = list(
                await asyncio.get_running_loop().run_in_executor(
                    None, self.decoders.decode, lines, batch[0].key
                )
            )
        except Exception as err:  # whatever the engine raises is its failure on these lines
            raise EngineFailed(err) from err
        if len(results) != len(lines):
            raise EngineFailed(RuntimeError(f"the engine returned {len(results)} lines for {len(lines)}"))
        seconds = time.monotonic() - started
        self._recent.append((pieces, seconds))
        self._concurrency.append(len(self._unanswered))
        self.stats.batches += 1
        self.stats.lines += len(lines)
        self.stats.pieces += pieces
        self.stats.largest_batch = max(self.stats.largest_batch, len(lines))
        self.stats.longest_decode_s = max(self.stats.longest_decode_s, seconds)
        for observe in self.on_batch:
            observe(len(lines), pieces, seconds)
        self._log_warnings(lines, results)
        return results

    def _log_warnings(self, lines: list[str], results: list[R]) -> None:
        # The line's length, not its text: a server's log holds no client's words.
        for line, result in zip(lines, results):
            said = self._warnings(result)
            if said:
                self.stats.warned_lines += 1
            for warning in said:
                logger.warning("mt serve: a sentence of %d characters: %s", len(line), warning)

    def _answer(self, sentence: Pooled[K, R], result: R) -> None:
        self.pool.cache.put(sentence.key, sentence.text, result)
        for request, index in sentence.waiters:
            if request.future.done():  # its client left, or another sentence of it failed
                continue
            request.results[index] = result
            request.missing -= 1
            if request.missing == 0:
                self.stats.requests += 1
                request.future.set_result(request.results)  # type: ignore[arg-type]  # all filled in

    def _fail(self, sentence: Pooled[K, R], err: EngineFailed) -> None:
        for request, _ in sentence.waiters:
            if not request.future.done():
                self.stats.failed_requests += 1
                request.future.set_exception(err)
