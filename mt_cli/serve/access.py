"""Who is asking, and whether they may: the API key and the request limits, one FastAPI dependency
that /translate, /detect, /suggest and /translate_file declare (``Access.admission``).

Each route reads its body once, in a dependency of its own (JSON or form fields; a multipart
upload); the admission depends on that one, so FastAPI calls it once a request and the route gets
both the fields and the ``Caller``. In order:

* **The key** (``--api-keys``): none sent is a 403 ``this server needs an API key: send
  api_key``, one not in the file a 403 ``invalid API key``. With keys on, the caller is its key;
  without, its IP address (uvicorn's peer, or the ``X-Forwarded-For`` of a proxy it trusts).
* **Requests a minute** (``--req-limit``, or the key's own ``req_limit``; 0: none): counted per
  caller over a sliding minute, as LibreTranslate's moving window counts them; one more is a 429
  ``{"error": "Slowdown: 10 per 1 minute"}`` (LibreTranslate's words) with ``Retry-After``, the
  seconds until the oldest request of that minute leaves it. A refused request is not counted, so
  a client that waits is served again. A request counts once it passes the key check, whatever
  its answer (as LibreTranslate's limiter counts every request).
* **Characters a request** (``--max-chars``, or the key's own ``char_limit``): the caller's
  ``char_limit``, which the route checks its texts against (400 past it).

The counts live in this process's memory: a client whose last request left the window is
forgotten at the next sweep (once a window), so they never grow past the clients of the last two
minutes. This module has no ``from __future__ import annotations``: FastAPI reads the admission's
signature, whose ``Depends`` names a per-route dependency, at run time.
"""

import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, Request

from mt_cli.serve.errors import ApiError
from mt_cli.serve.keys import KeyLimits

WINDOW_S = 60.0  # the span --req-limit counts requests over: LibreTranslate's "N per minute"
NO_KEY = "this server needs an API key: send api_key"
BAD_KEY = "invalid API key"
_NO_LIMITS = KeyLimits()


@dataclass(frozen=True)
class Caller:
    """Who sent a request: its key (with keys on) and address, and what one request may send."""

    key: str | None  # the API key, when --api-keys is on
    address: str  # the client's IP address
    char_limit: int  # characters one of its requests may send, all its texts together

    @property
    def client(self) -> tuple[str, str]:
        """The one whose requests are counted: the key with keys on, else the address (tagged,
        so that a key spelled as an address is never counted with that address)."""
        return ("key", self.key) if self.key is not None else ("address", self.address)


class Window:
    """Each client's admitted requests over the last ``span`` seconds (a sliding window: the
    times themselves, at most the limit of them a client)."""

    def __init__(self, span: float = WINDOW_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.span = span
        self._clock = clock
        self._times: dict[tuple[str, str], deque[float]] = {}
        self._next_sweep = clock() + span

    def __len__(self) -> int:
        """The clients counted now (for the tests: they must not grow without bound)."""
        return len(self._times)

    def admit(self, client: tuple[str, str], limit: int) -> int | None:
        """None, the request counted, if ``client`` has sent fewer than ``limit`` in the window;
        else the whole seconds until its oldest one leaves it (at least 1)."""
        now = self._clock()
        if now >= self._next_sweep:
            self._sweep(now)
        times = self._times.setdefault(client, deque())
        while times and times[0] <= now - self.span:
            times.popleft()
        if len(times) >= limit:
            return max(1, math.ceil(times[0] + self.span - now))
        times.append(now)
        return None

    def _sweep(self, now: float) -> None:
        """Forget the clients with no request in the window."""
        self._times = {
            client: times for client, times in self._times.items() if times and times[-1] > now - self.span
        }
        self._next_sweep = now + self.span


class Access:
    """The key check and the limits of one server; ``refused`` counts its 429s (for /metrics)."""

    def __init__(
        self,
        keys: Mapping[str, KeyLimits],
        req_limit: int,
        max_chars: int,
        window: Window | None = None,
    ) -> None:
        self.keys = keys
        self.req_limit = req_limit
        self.max_chars = max_chars
        self.window = window or Window()
        self.refused = 0

    def admit(self, fields: Mapping[str, Any], address: str) -> Caller:
        """The caller of a request with ``fields`` from ``address``, or the ApiError refusing it."""
        key = self._key(fields)
        limits = self.keys.get(key, _NO_LIMITS) if key is not None else _NO_LIMITS
        caller = Caller(key, address, limits.char_limit or self.max_chars)
        limit = self.req_limit if limits.req_limit is None else limits.req_limit
        if limit > 0 and (wait := self.window.admit(caller.client, limit)) is not None:
            self.refused += 1
            raise ApiError(429, f"Slowdown: {limit} per 1 minute", {"Retry-After": str(wait)})
        return caller

    def _key(self, fields: Mapping[str, Any]) -> str | None:
        """The request's key: None when no keys are configured; else one of them, or a 403."""
        if not self.keys:
            return None
        key = fields.get("api_key")
        if key is None or key == "":
            raise ApiError(403, NO_KEY)
        if not isinstance(key, str) or key not in self.keys:
            raise ApiError(403, BAD_KEY)
        return key

    def admission(
        self, read_fields: Callable[..., Awaitable[dict[str, Any]]]
    ) -> Callable[..., Awaitable[Caller]]:
        """The dependency a route declares: its caller, from the fields ``read_fields`` (itself a
        dependency, which the route may declare too: FastAPI calls it once) reads."""

        async def admit(request: Request, fields: dict[str, Any] = Depends(read_fields)) -> Caller:
            return self.admit(fields, address_of(request))

        return admit


def address_of(request: Request) -> str:
    """The client's IP address; an ASGI server that gives none (a test's transport) is one client."""
    return request.client.host if request.client is not None else "unknown"
