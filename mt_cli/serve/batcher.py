"""The micro-batcher: concurrent requests' lines decoded together, one engine call at a time.

A request's lines wait in a queue bounded in lines (``QueueFull`` past it, the server's 429).
One task takes the first waiting request, gathers more for ``wait`` seconds or until the
batch holds ``batch_lines`` lines, runs ONE ``decode`` call on all of them in a
single-thread executor (the engine is never called twice at once, and the event loop keeps
accepting requests while it decodes), and hands each request its own slice of the answers.

Each request carries a key, the decode settings it needs (``mt serve``: how many alternatives,
which sets the beam and the n-best): a batch holds requests of one key only, since one engine
call decodes with one setting. A request of another key that arrives while a batch gathers is
held aside, first in line for the next batch, so no key waits behind a stream of another.

One request's text never fails another's: if a batch's call raises, each of its requests is
decoded again alone, and only the ones that still fail get the error (``EngineFailed``).

A request whose caller stopped waiting (the client hung up: its task was cancelled) gives its
place in the queue back at once and is not decoded; ``Stats.dropped_*`` count such requests.

``drain(grace)`` refuses new work and answers what is queued, as long as it can start
decoding before the grace period ends (less the longest decode seen, so the last batch still
finishes in time); what is still waiting then is answered ``Closed``, and so is whatever is
unanswered when the grace period ends. ``close()`` waits until every accepted request is
answered and the engine is idle, then stops.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)  # a batch's decode settings
R = TypeVar("R")  # what the engine gives for one line
Decode = Callable[[list[str], K], Sequence[R]]  # (lines, key) -> one result per line, in order
DRAIN_MARGIN_S = 0.5  # kept free at the end of a grace period beyond the longest decode seen


class QueueFull(Exception):
    """The queue holds too many lines to take this request now: the client should retry later."""


class Closed(Exception):
    """The batcher is stopping and takes no new requests (or could not reach this one in time)."""


class EngineFailed(Exception):
    """The engine raised on this request's lines decoded alone: the error is mt's, not the client's."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(" ".join(f"{type(cause).__name__}: {cause}".split()))  # one line, for the log
        self.cause = cause


@dataclass(eq=False)  # compared by identity: jobs are kept in a set
class _Job(Generic[K, R]):
    lines: list[str]
    key: K  # decoded only in a batch of jobs with an equal key
    future: asyncio.Future[list[R]] = field(repr=False)
    queued: bool = True  # its lines still count in ``queued_lines``


@dataclass
class Stats:
    """What the engine calls have decoded so far: for the health endpoint and the tests."""

    batches: int = 0
    requests: int = 0
    lines: int = 0
    largest_batch: int = 0  # the most requests one engine call answered
    longest_decode_s: float = 0.0  # the slowest engine call, what a stop must leave time for
    retried_batches: int = 0  # batches that failed and were decoded again request by request
    failed_requests: int = 0  # requests the engine failed on even alone
    dropped_requests: int = 0  # requests nobody waited for any more when their turn came
    dropped_lines: int = 0

    def add(self, requests: int, lines: int, seconds: float) -> None:
        self.batches += 1
        self.requests += requests
        self.lines += lines
        self.largest_batch = max(self.largest_batch, requests)
        self.longest_decode_s = max(self.longest_decode_s, seconds)


class Batcher(Generic[K, R]):
    """Gathers the lines of concurrent ``translate`` calls of one key into single ``decode`` calls."""

    def __init__(
        self, decode: Decode[K, R], max_queue: int, wait: float, batch_lines: int, parallel: int = 1
    ) -> None:
        if max_queue < 1 or batch_lines < 1 or wait < 0 or parallel < 1:
            raise ValueError("max_queue, batch_lines and parallel must be positive and wait not negative")
        self._parallel = parallel  # batches decoded at once, each in its own thread
        self._decode_lines = decode
        self.max_queue = max_queue
        self._wait = wait
        self._batch_lines = batch_lines
        self._queue: asyncio.Queue[_Job[K, R]] = asyncio.Queue()
        # Taken off the queue while a batch of another key gathered: older than anything still
        # in the queue, so the next batch starts with them.
        self._held: deque[_Job[K, R]] = deque()
        self._waiting: set[_Job[K, R]] = set()  # queued or held, not yet in a batch
        self._unanswered: set[_Job[K, R]] = set()  # accepted, future not yet resolved (decoding or not)
        self.queued_lines = 0  # lines accepted and not yet handed to the engine
        self.pending_requests = 0  # requests accepted and not yet answered
        self.stats = Stats()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._deadlines: list[asyncio.TimerHandle] = []

    async def start(self) -> None:
        """Start the gathering task on the running loop (the server's, in its startup)."""
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self._parallel, thread_name_prefix="mt-engine"
        )
        self._task = asyncio.get_running_loop().create_task(self._run(), name="mt-batcher")

    async def translate(self, lines: list[str], key: K) -> list[R]:
        """The engine's results for ``lines`` decoded with ``key``, in order, decoded along with
        whatever else of that key is waiting. Cancelling the call (a client that left) takes the
        lines out of the queue."""
        if self._closing or self._task is None:
            raise Closed("the server is stopping")
        if self.queued_lines + len(lines) > self.max_queue:
            raise QueueFull(
                f"the queue is full ({self.queued_lines} of {self.max_queue} lines waiting); retry shortly"
            )
        job: _Job[K, R] = _Job(lines, key, asyncio.get_running_loop().create_future())
        job.future.add_done_callback(lambda _: self._unqueue(job))
        job.future.add_done_callback(lambda _: self._unanswered.discard(job))
        self.queued_lines += len(lines)
        self.pending_requests += 1
        self._waiting.add(job)
        self._unanswered.add(job)
        self._queue.put_nowait(job)
        try:
            return await job.future
        finally:
            self.pending_requests -= 1

    def drain(self, grace: float) -> None:
        """Take no new requests; answer the queued ones that can start decoding within ``grace``
        seconds less the longest decode seen, and ``Closed`` to the rest when that time is up, and
        to any still unanswered when ``grace`` is up (a decode running then is not stopped, but
        its requests are answered, so the server can close their connections in time)."""
        self._closing = True
        if not self._deadlines:
            loop = asyncio.get_running_loop()
            last_start = max(0.0, grace - self.stats.longest_decode_s - DRAIN_MARGIN_S)
            self._deadlines = [
                loop.call_later(last_start, self._expire, self._waiting),
                loop.call_later(grace, self._expire, self._unanswered),
            ]

    async def close(self) -> None:
        """Take no new requests, answer every accepted one, then stop the task and the thread."""
        self._closing = True
        await self._queue.join()  # each job is marked done once its future is resolved
        for deadline in self._deadlines:
            deadline.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    @staticmethod
    def _expire(jobs: set[_Job[K, R]]) -> None:
        for job in list(jobs):
            if not job.future.done():
                job.future.set_exception(Closed("the server is stopping and could not decode this in time"))

    def _unqueue(self, job: _Job[K, R]) -> None:
        """The job left the queue (put in a batch, or answered or cancelled while waiting):
        its lines no longer count against the queue's room."""
        self._waiting.discard(job)
        if job.queued:
            job.queued = False
            self.queued_lines -= len(job.lines)

    async def _run(self) -> None:
        """Gather a batch whenever a decoding slot is free; requests wait in the queue meanwhile,
        so the batches grow with the load."""
        slots = asyncio.Semaphore(self._parallel)
        decoding: set[asyncio.Task[None]] = set()
        while True:
            await slots.acquire()
            jobs = await self._gather()
            task = asyncio.get_running_loop().create_task(self._decode_then_release(jobs, slots))
            decoding.add(task)  # held until done: the loop keeps only weak references to tasks
            task.add_done_callback(decoding.discard)

    async def _decode_then_release(self, jobs: list[_Job[K, R]], slots: asyncio.Semaphore) -> None:
        try:
            await self._decode(jobs)
        finally:
            slots.release()
            for _ in jobs:
                self._queue.task_done()

    async def _gather(self) -> list[_Job[K, R]]:
        """The first waiting job and those of its key already waiting or arriving within ``wait``
        seconds, up to the line budget; jobs of other keys are held for the next batch. Jobs
        nobody waits for any more count nothing against the budget."""
        first = self._held.popleft() if self._held else await self._queue.get()
        jobs = [first]
        self._unqueue(first)
        lines = _wanted_lines(first)
        for job in list(self._held):  # the held jobs of this key, oldest first
            if lines >= self._batch_lines:
                break
            if job.key == first.key:
                self._held.remove(job)
                jobs.append(job)
                self._unqueue(job)
                lines += _wanted_lines(job)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._wait
        while lines < self._batch_lines:
            if self._queue.empty():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    job = await asyncio.wait_for(self._queue.get(), remaining)
                except asyncio.TimeoutError:  # not the builtin before Python 3.11
                    break
            else:
                job = self._queue.get_nowait()
            if job.key != first.key:
                self._held.append(job)  # still waiting: its lines still count against the queue
                continue
            jobs.append(job)
            self._unqueue(job)
            lines += _wanted_lines(job)
        return jobs

    async def _decode(self, jobs: list[_Job[K, R]]) -> None:
        """One engine call for the jobs still wanted; each future gets its slice. If the call
        raises, each job is decoded alone, so the error reaches only the request(s) at fault."""
        live = [job for job in jobs if not job.future.done()]  # a client that left is not decoded for
        for job in jobs:
            if job.future.done():
                self.stats.dropped_requests += 1
                self.stats.dropped_lines += len(job.lines)
        if not live:
            return
        try:
            outputs = await self._call([line for job in live for line in job.lines], live[0].key, len(live))
        except EngineFailed as err:
            if len(live) == 1:
                self._fail(live[0], err)
                return
            self.stats.retried_batches += 1
            for job in live:
                if job.future.done():  # its client left while the batch ran
                    continue
                try:
                    alone = await self._call(job.lines, job.key, 1)
                except EngineFailed as failure:
                    self._fail(job, failure)
                else:
                    if not job.future.done():  # answered Closed by a stop's deadline meanwhile
                        job.future.set_result(alone)
            return
        start = 0
        for job in live:
            end = start + len(job.lines)
            if not job.future.done():
                job.future.set_result(outputs[start:end])
            start = end

    async def _call(self, lines: list[str], key: K, requests: int) -> list[R]:
        """The engine's results for ``lines`` (in the executor), or ``EngineFailed``."""
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        try:
            outputs = list(await loop.run_in_executor(self._executor, self._decode_lines, lines, key))
        except Exception as err:  # whatever the engine raises is its failure on these lines
            raise EngineFailed(err) from err
        if len(outputs) != len(lines):
            raise EngineFailed(RuntimeError(f"the engine returned {len(outputs)} lines for {len(lines)}"))
        self.stats.add(requests, len(lines), time.monotonic() - started)
        return outputs

    def _fail(self, job: _Job[K, R], err: EngineFailed) -> None:
        self.stats.failed_requests += 1
        if not job.future.done():
            job.future.set_exception(err)


def _wanted_lines(job: _Job[K, R]) -> int:
    return 0 if job.future.done() else len(job.lines)
