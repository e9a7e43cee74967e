"""The sentence cache: a sentence decoded once with some options is answered from memory the
next time, as LibreTranslate's ``--translation-cache`` and Bergamot's cache do.

An LRU of ``size`` entries keyed by the decoding options (the target language, beam, n-best and
length penalty among them) and the sentence; one cache serves one model, so the model is the
server's. Used on the event loop only. A cached answer is one the engine gave for that sentence:
the engine's results depend slightly on what else shared the batch (padding changes the sums),
so a cache hit repeats the first answer rather than what a new batch would have given.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


class SentenceCache(Generic[K, R]):
    """At most ``size`` (key, sentence) -> result entries, the least recently used dropped first;
    ``size`` 0 keeps nothing."""

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError("a cache size cannot be negative")
        self.size = size
        self._entries: OrderedDict[tuple[K, str], R] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K, sentence: str) -> R | None:
        """The cached result, now the most recently used; None (a miss) if there is none."""
        if self.size == 0:
            return None
        found = self._entries.get((key, sentence))
        if found is None:
            self.misses += 1
            return None
        self._entries.move_to_end((key, sentence))
        self.hits += 1
        return found

    def put(self, key: K, sentence: str, result: R) -> None:
        if self.size == 0:
            return
        self._entries[(key, sentence)] = result
        self._entries.move_to_end((key, sentence))
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
