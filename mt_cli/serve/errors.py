"""The refusals a request can get: ``ApiError`` (its status, its one-line message, its headers),
and the batcher's ``QueueFull`` (429), ``Late`` and ``Closed`` (503), which ``handlers`` answers;
and ``show``, the one way a message repeats what a client sent."""

from __future__ import annotations


class ApiError(Exception):
    """A request the server refuses: the status, the one-line message of ``{"error": ...}`` and
    any headers the answer needs (``Connection: close`` where the rest of the request is unread)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


def show(text: str, limit: int = 40) -> str:
    """``text`` as an error message repeats it: cut to ``limit`` characters, and any character
    UTF-8 cannot hold written as an escape, so the answer itself can always be encoded."""
    cut = text if len(text) <= limit else text[:limit] + "..."
    return cut.encode("utf-8", "backslashreplace").decode("utf-8")


class QueueFull(Exception):
    """The pool holds too much to take this request now: retry after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Late(Exception):
    """The request waited longer than the server's deadline for decoding and was not decoded."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Closed(Exception):
    """The batcher is stopping and takes no new requests (or could not reach this one in time)."""
