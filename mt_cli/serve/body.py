"""A request's body read off the connection under every limit a server on a network needs, and
a client that hangs up noticed while its request waits.

The body is read from the ASGI ``receive`` channel itself (not ``Request.stream()``), so each of
these is an ``ApiError`` with its status and never a traceback: a body over the size limit (413,
the rest of it read and dropped so the client can read the answer), a body that has not arrived
within the read timeout (408: uvicorn has no body timeout, and a client that declares 100 bytes
and sends 10 would otherwise hold its connection, and a stopping server, forever), the server
stopping while the body is still arriving (503: such a request was never accepted), and the
client hanging up (``ClientLeft``, an answer nobody reads).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Mapping
from typing import TypeVar

from starlette.types import Message, Receive

from mt_cli.serve.errors import ApiError

T = TypeVar("T")
DRAIN_LIMIT = 4 << 20  # bytes of an oversized body read and dropped, so the client can read its 413
CLOSE = {"Connection": "close"}
_DIGITS = re.compile(r"[0-9]{1,30}")  # str.isdigit() takes "²" too, and int() then fails


class ClientLeft(ApiError):
    """The client closed its connection: nobody will read the answer (status 499, as nginx logs it)."""

    def __init__(self) -> None:
        super().__init__(499, "the client closed the connection")


async def read_body(
    receive: Receive, headers: Mapping[str, str], max_body: int, timeout: float, stopping: asyncio.Event
) -> bytes:
    """The whole body within ``timeout`` seconds, or the ``ApiError`` that ends the request."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    declared = headers.get("content-length")
    if declared is not None and _DIGITS.fullmatch(declared) and int(declared) > max_body:
        read_all = await _drain(receive, deadline, stopping, 0)
        message = f"the request body ({declared} bytes) is over this server's {max_body} bytes"
        raise ApiError(413, message, None if read_all else CLOSE)
    chunks: list[bytes] = []
    size, more = 0, True
    while more:
        message = await _next(receive, deadline, stopping, timeout)
        chunk = message.get("body", b"")
        more = message.get("more_body", False)
        size += len(chunk)
        if size > max_body:
            read_all = not more or await _drain(receive, deadline, stopping, size)
            message = f"the request body is over this server's {max_body} bytes"
            raise ApiError(413, message, None if read_all else CLOSE)
        chunks.append(chunk)
    return b"".join(chunks)


async def _next(receive: Receive, deadline: float, stopping: asyncio.Event, timeout: float) -> Message:
    """The next body message, or the ApiError for the deadline, the stop or the client's leaving."""
    remaining = deadline - asyncio.get_running_loop().time()
    message_task = asyncio.ensure_future(receive())
    stop_task = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait(
            {message_task, stop_task}, timeout=max(0.0, remaining), return_when="FIRST_COMPLETED"
        )
    finally:
        stop_task.cancel()
        if not message_task.done():
            message_task.cancel()
    if message_task.done():  # a chunk that arrived with the stop or the deadline is still read
        message = message_task.result()
        if message["type"] == "http.disconnect":
            raise ClientLeft()
        return message
    if stopping.is_set():
        raise ApiError(503, "the server is stopping; send the request again", CLOSE)
    raise ApiError(408, f"the request body did not arrive within {timeout:g} s", CLOSE)


async def _drain(receive: Receive, deadline: float, stopping: asyncio.Event, size: int) -> bool:
    """Read and drop the rest of a refused body, up to a cap and within the deadline: a server
    that closes a connection with unread data makes the client's kernel reset it, and the client
    would lose the 413. Whether it was all read (if not, the answer closes the connection)."""
    while size <= DRAIN_LIMIT:
        try:
            message = await _next(receive, deadline, stopping, 0)
        except ApiError:  # late, stopping or gone: answered anyway, then the connection closes
            return False
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            return True
    return False


async def unless_client_leaves(receive: Receive, work: Awaitable[T]) -> T:
    """The result of ``work``, or ``ClientLeft`` as soon as the client hangs up, ``work`` then
    cancelled (for a translation: its lines leave the queue undecoded)."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_until_disconnect(receive))
    try:
        await asyncio.wait({task, watch}, return_when="FIRST_COMPLETED")
    finally:
        watch.cancel()
        if not task.done():
            task.cancel()
    if not task.done() or task.cancelled():
        raise ClientLeft()
    return task.result()


async def _until_disconnect(receive: Receive) -> None:
    """Returns when the ASGI server reports ``http.disconnect``: after the body, ``receive`` has
    nothing else to say (uvicorn sends it when the connection closes)."""
    while (await receive())["type"] != "http.disconnect":
        pass
