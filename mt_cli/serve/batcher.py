"""The micro-batcher: concurrent requests' lines decoded together, one engine call at a time.

A request's lines wait in a queue bounded in lines (``QueueFull`` past it, the server's 429).
One task takes the first waiting request, gathers more for ``wait`` seconds or until the
batch holds ``batch_lines`` lines, runs ONE ``translate`` call on all of them in a
single-thread executor (the engine is never called twice at once, and the event loop keeps
accepting requests while it decodes), and hands each request its own slice of the answers.

``close()`` refuses new work, then waits until every accepted request is answered: a server
stopping on SIGTERM drains the queue before it exits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass, field

Translate = Callable[[list[str]], list[str]]


class QueueFull(Exception):
    """The queue holds too many lines to take this request now: the client should retry later."""


class Closed(Exception):
    """The batcher is stopping and takes no new requests."""


@dataclass
class _Job:
    lines: list[str]
    future: asyncio.Future[list[str]] = field(repr=False)


@dataclass
class Stats:
    """What the engine calls have decoded so far: for the health endpoint and the tests."""

    batches: int = 0
    requests: int = 0
    lines: int = 0
    largest_batch: int = 0  # the most requests one engine call answered

    def add(self, requests: int, lines: int) -> None:
        self.batches += 1
        self.requests += requests
        self.lines += lines
        self.largest_batch = max(self.largest_batch, requests)


class Batcher:
    """Gathers the lines of concurrent ``translate`` calls into single calls of ``translate_lines``."""

    def __init__(
        self, translate_lines: Translate, max_queue: int, wait: float, batch_lines: int, parallel: int = 1
    ) -> None:
        if max_queue < 1 or batch_lines < 1 or wait < 0 or parallel < 1:
            raise ValueError("max_queue, batch_lines and parallel must be positive and wait not negative")
        self._parallel = parallel  # batches decoded at once, each in its own thread
        self._translate_lines = translate_lines
        self.max_queue = max_queue
        self._wait = wait
        self._batch_lines = batch_lines
        self._queue: asyncio.Queue[_Job] = asyncio.Queue()
        self.queued_lines = 0  # lines accepted and not yet handed to the engine
        self.pending_requests = 0  # requests accepted and not yet answered
        self.stats = Stats()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    async def start(self) -> None:
        """Start the gathering task on the running loop (the server's, in its startup)."""
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self._parallel, thread_name_prefix="mt-engine"
        )
        self._task = asyncio.get_running_loop().create_task(self._run(), name="mt-batcher")

    async def translate(self, lines: list[str]) -> list[str]:
        """The translations of ``lines``, in order, decoded along with whatever else is waiting."""
        if self._closing or self._task is None:
            raise Closed("the server is stopping")
        if self.queued_lines + len(lines) > self.max_queue:
            raise QueueFull(
                f"the queue is full ({self.queued_lines} of {self.max_queue} lines waiting); retry shortly"
            )
        job = _Job(lines, asyncio.get_running_loop().create_future())
        self.queued_lines += len(lines)
        self.pending_requests += 1
        self._queue.put_nowait(job)
        try:
            return await job.future
        finally:
            self.pending_requests -= 1

    async def close(self) -> None:
        """Take no new requests, answer every accepted one, then stop the task and the thread."""
        self._closing = True
        await self._queue.join()  # each job is marked done once its future is resolved
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._executor is not None:
            self._executor.shutdown(wait=True)

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

    async def _decode_then_release(self, jobs: list[_Job], slots: asyncio.Semaphore) -> None:
        try:
            await self._decode(jobs)
        finally:
            slots.release()
            for _ in jobs:
                self._queue.task_done()

    async def _gather(self) -> list[_Job]:
        """The first waiting job and those that arrive within ``wait`` seconds, up to the line budget."""
        jobs = [await self._take()]
        lines = len(jobs[0].lines)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._wait
        while lines < self._batch_lines:
            if self._queue.empty():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    job = await asyncio.wait_for(self._take(), remaining)
                except asyncio.TimeoutError:  # not the builtin before Python 3.11
                    break
            else:
                job = self._take_nowait()
            jobs.append(job)
            lines += len(job.lines)
        return jobs

    async def _take(self) -> _Job:
        job = await self._queue.get()
        self.queued_lines -= len(job.lines)
        return job

    def _take_nowait(self) -> _Job:
        job = self._queue.get_nowait()
        self.queued_lines -= len(job.lines)
        return job

    async def _decode(self, jobs: list[_Job]) -> None:
        """One engine call for the jobs still wanted; each future gets its slice or the error."""
        live = [job for job in jobs if not job.future.done()]  # a client that left is not decoded for
        if not live:
            return
        lines = [line for job in live for line in job.lines]
        loop = asyncio.get_running_loop()
        try:
            outputs = await loop.run_in_executor(self._executor, self._translate_lines, lines)
            if len(outputs) != len(lines):
                raise RuntimeError(f"the engine returned {len(outputs)} lines for {len(lines)}")
        except Exception as err:  # the engine's failure is every waiting request's answer, not the task's end
            for job in live:
                if not job.future.done():
                    job.future.set_exception(err)
            return
        self.stats.add(len(live), len(lines))
        start = 0
        for job in live:
            end = start + len(job.lines)
            if not job.future.done():
                job.future.set_result(outputs[start:end])
            start = end
