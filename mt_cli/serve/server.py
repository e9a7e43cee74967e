"""uvicorn as ``mt serve`` runs it: on a socket already listening, with the timeouts a server
on a network needs and a stop that always ends.

uvicorn's h11 protocol is used with two changes (``_protocol``): a request's headers must arrive
within ``timeout_read`` seconds of the connection (or of the first byte of a later request on a
kept-alive one), else the connection is closed: uvicorn arms no timer before a request's headers,
so a connection that sends nothing, or half a request line, stayed open forever. And its answer
to a malformed request (400) is JSON ``{"error": ...}`` like every other, not text.

On SIGTERM (or Ctrl-C) uvicorn stops accepting connections and closes the idle ones; ``_Server``
first tells the app (``app.state.stop()``), which answers 503 to bodies still arriving and
answers every accepted request within ``timeout_graceful_shutdown`` (503 for what it could not
decode in time), so every connection closes in time even with a stalled client. uvicorn's own
graceful-shutdown timeout, a second later, only backs that up: when it fires, uvicorn cancels
the requests still running and logs a traceback for each.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from collections.abc import Callable

import h11
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from mt_cli.serve.settings import Settings

BACKSTOP_S = 1.0  # uvicorn's timeout past the app's own grace period: the app answers first


def _protocol(timeout_read: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a header timeout and JSON for a malformed request."""

    class Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._between_requests():  # the first bytes of a request start the clock, if not running
                self._arm()
            super().data_received(data)
            if not self._between_requests():  # the headers are in: the body has its own timeout
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            body = json.dumps({"error": f"invalid HTTP request: {msg}"}).encode()
            headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
            self.transport.write(self.conn.send(h11.Response(status_code=400, headers=headers)))
            self.transport.write(self.conn.send(h11.Data(data=body)))
            self.transport.write(self.conn.send(h11.EndOfMessage()))
            self.transport.close()

        def _between_requests(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self) -> None:
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(timeout_read, self._headers_too_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_late(self) -> None:
            self._header_timer = None
            if self._between_requests() and not self.transport.is_closing():
                self.transport.close()

    return Protocol


class _Server(uvicorn.Server):
    """uvicorn's server, telling the app when its graceful shutdown begins."""

    def __init__(self, config: uvicorn.Config, on_stop: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_stop = on_stop

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._on_stop()
        await super().shutdown(sockets=sockets)


def serve(app: FastAPI, listener: socket.socket, settings: Settings) -> bool:
    """Run ``app`` on ``listener`` until SIGTERM (return) or Ctrl-C (KeyboardInterrupt), both
    graceful; whether the server had started."""
    config = uvicorn.Config(
        app,
        http=_protocol(settings.timeout_read),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_keep_alive=settings.timeout_keep_alive,  # type: ignore[arg-type]  # a float works
        timeout_graceful_shutdown=settings.timeout_graceful_shutdown + BACKSTOP_S,  # type: ignore[arg-type]
    )
    server = _Server(config, app.state.stop)

    def stop(signum: int, frame: object) -> None:
        # uvicorn restores this handler after its graceful shutdown and raises SIGTERM again:
        # catching it here makes a stop by SIGTERM exit 0 instead of dying by the signal.
        server.should_exit = True

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        server.run(sockets=[listener])
    finally:
        signal.signal(signal.SIGTERM, previous)
    return server.started
