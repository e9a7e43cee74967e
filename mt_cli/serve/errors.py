"""``ApiError``, every refusal a request can get (its status, its one-line message, its headers),
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
