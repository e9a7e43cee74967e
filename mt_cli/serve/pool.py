"""The sentence pool: what waits for a decoder, and which of it the next batch takes.

Each request becomes a ``Pending`` (its results, filled in as its sentences are answered), and
each distinct (key, sentence) one ``Pooled`` entry with the places in the requests that want it,
so a sentence that several requests send at once is decoded once and a cached one not at all.
The pool is bounded in sentences and in source pieces; ``take`` chooses a batch by the piece
budget, the oldest waiting sentence first and the rest nearest to it in length. The ``batcher``
decides when to take and decodes; the pool is used on the event loop only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from mt_cli.serve.cache import SentenceCache

K = TypeVar("K", bound=Hashable)  # a batch's decode settings
R = TypeVar("R")  # what the engine gives for one line


@dataclass(eq=False)  # compared by identity: kept in sets
class Pending(Generic[R]):
    """A request not answered yet."""

    results: list[R | None]
    future: asyncio.Future[list[R]] = field(repr=False)
    deadline: float  # the event loop's time after which it is answered Late
    missing: int = 0  # sentences not answered yet
    pooled: list[Pooled[Any, R]] = field(default_factory=list)  # the pool's entries it waits on


@dataclass(eq=False)
class Pooled(Generic[K, R]):
    """A distinct sentence waiting or decoding, and where its result goes."""

    key: K
    text: str
    pieces: int
    waiters: list[tuple[Pending[R], int]] = field(default_factory=list)  # (request, its index there)


@dataclass(frozen=True)
class Lookup(Generic[K, R]):
    """Where a request's lines stand: those already waiting or decoding that it joins (with its
    index), and the new ones, each with its indices in the request; cached ones are filled in."""

    joins: list[tuple[Pooled[K, R], int]]
    fresh: dict[str, list[int]]


class SentencePool(Generic[K, R]):
    """Sentences waiting (oldest first) and decoding, within ``max_sentences`` and ``max_pieces``."""

    def __init__(self, max_sentences: int, max_pieces: int, batch_pieces: int, cache_size: int) -> None:
        self.max_sentences = max_sentences
        self.max_pieces = max_pieces
        self.batch_pieces = batch_pieces
        self.cache: SentenceCache[K, R] = SentenceCache(cache_size)
        self.waiting: dict[tuple[K, str], Pooled[K, R]] = {}
        self.decoding: dict[tuple[K, str], Pooled[K, R]] = {}
        self.waiting_pieces = 0

    def look_up(self, request: Pending[R], lines: list[str], key: K) -> Lookup[K, R]:
        joins: list[tuple[Pooled[K, R], int]] = []
        fresh: dict[str, list[int]] = {}
        for index, line in enumerate(lines):
            if line in fresh:
                fresh[line].append(index)
            elif (known := self.waiting.get((key, line)) or self.decoding.get((key, line))) is not None:
                joins.append((known, index))
            elif (cached := self.cache.get(key, line)) is not None:
                request.results[index] = cached
            else:
                fresh[line] = [index]
        return Lookup(joins, fresh)

    def has_room(self, sentences: int, pieces: int) -> bool:
        """Whether that many more fit; an empty pool takes any request (one larger than the pool
        alone is bounded by the request limits, not here)."""
        if not self.waiting or not sentences:
            return True
        return (
            len(self.waiting) + sentences <= self.max_sentences
            and self.waiting_pieces + pieces <= self.max_pieces
        )

    def add(self, request: Pending[R], key: K, found: Lookup[K, R], pieces: list[int]) -> None:
        """The request joins its sentences already here and adds the fresh ones (with their pieces)."""
        for sentence, index in found.joins:
            sentence.waiters.append((request, index))
            request.pooled.append(sentence)
        for (text, indices), count in zip(found.fresh.items(), pieces, strict=True):
            sentence = Pooled(key, text, count, [(request, i) for i in indices])
            self.waiting[(key, text)] = sentence
            self.waiting_pieces += count
            request.pooled.append(sentence)
        request.missing = len(found.joins) + sum(len(indices) for indices in found.fresh.values())

    def forget(self, request: Pending[R]) -> None:
        """The request wants nothing more: its waiting sentences nobody else wants leave (those
        decoding are answered to whoever still waits, and kept in the cache)."""
        for sentence in request.pooled:
            place = (sentence.key, sentence.text)
            if self.waiting.get(place) is not sentence:
                continue
            sentence.waiters = [(waiter, i) for waiter, i in sentence.waiters if waiter is not request]
            if not sentence.waiters:
                del self.waiting[place]
                self.waiting_pieces -= sentence.pieces
        request.pooled.clear()

    def waiting_requests(self) -> set[Pending[R]]:
        return {request for sentence in self.waiting.values() for request, _ in sentence.waiters}

    def decoding_requests(self) -> int:
        return len({request for sentence in self.decoding.values() for request, _ in sentence.waiters})

    def take(self) -> list[Pooled[K, R]]:
        """The next batch, moved to decoding: the oldest waiting sentence and those of its key
        that fit the budget, all of them if they fit, else the nearest to it in length first."""
        first = next(iter(self.waiting.values()))
        same = [sentence for sentence in self.waiting.values() if sentence.key == first.key]
        if sum(sentence.pieces for sentence in same) > self.batch_pieces:
            same.sort(key=lambda sentence: abs(sentence.pieces - first.pieces))  # stable: oldest first
        batch, pieces = [], 0
        for sentence in same:
            if batch and pieces + sentence.pieces > self.batch_pieces:
                continue
            batch.append(sentence)
            pieces += sentence.pieces
        for sentence in batch:
            place = (sentence.key, sentence.text)
            del self.waiting[place]
            self.decoding[place] = sentence
            self.waiting_pieces -= sentence.pieces
        return batch

    def decoded(self, batch: list[Pooled[K, R]]) -> None:
        """The batch's engine call ended (answered or failed)."""
        for sentence in batch:
            self.decoding.pop((sentence.key, sentence.text), None)
