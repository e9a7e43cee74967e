"""What the batcher decodes on: ``parallel`` engine calls at once, each from its own thread.

``InProcess`` calls the engine in the server's process: the CTranslate2 engine, which releases
the GIL and decodes ``inter_threads`` batches side by side, and mt's engine on a GPU or where
worker processes are off. ``workers.WorkerPool`` decodes mt's engine in worker processes, one per
core. Whatever a call raises reaches the batcher, which makes it an ``EngineFailed``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Protocol, TypeVar

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")
Decode = Callable[[list[str], K], Sequence[R]]  # (lines, key) -> one result per line, in order


class EngineFailed(Exception):
    """The engine raised on these lines: the error is mt's, not the client's."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(" ".join(f"{type(cause).__name__}: {cause}".split()))  # one line, for the log
        self.cause = cause


class WorkerDied(RuntimeError):
    """A decoding worker process died during a batch, and its replacement too."""


class Decoders(Protocol[K, R]):
    """Up to ``parallel`` ``decode`` calls at once, from as many threads."""

    @property
    def parallel(self) -> int: ...

    @property
    def restarts(self) -> int:
        """Decoding processes that died and were replaced."""
        ...

    @property
    def pids(self) -> list[int]:
        """The decoding processes (none: decoding in the server's own)."""
        ...

    def decode(self, lines: list[str], key: K) -> Sequence[R]: ...

    def close(self) -> None: ...


class InProcess:
    """The engine's own decode function, called in the server's process."""

    def __init__(self, decode: Decode, parallel: int = 1) -> None:
        if parallel < 1:
            raise ValueError("parallel must be positive")
        self._decode = decode
        self.parallel = parallel
        self.restarts = 0  # nothing to restart: the engine runs in this process
        self.pids: list[int] = []

    def decode(self, lines: list[str], key: Hashable) -> Sequence[object]:
        return self._decode(lines, key)

    def close(self) -> None:
        pass
