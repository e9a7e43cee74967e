"""Every answer that is not a translation: ``{"error": message}`` with LibreTranslate's status.

The exception handlers turn each refusal into its answer: ``ApiError`` (400, 403, 408, 413, 503,
with its headers), ``QueueFull`` (429 with ``Retry-After``), ``Late`` (503 with ``Retry-After``),
``Closed`` (503, connection closed), Starlette's own 404/405 and FastAPI's 422 (as 400).
``Guard``, the outermost layer inside CORS, limits the requests handled at once (503 past
``--limit-concurrency``) and is the
one catch-all: whatever else escapes the app is mt's own bug, answered 500 and logged as one
line, never as a traceback per request.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mt_cli.serve.errors import ApiError, Closed, Late, QueueFull, show

logger = logging.getLogger("mt.serve")


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """LibreTranslate's error answer."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def add_error_handlers(app: FastAPI) -> None:
    """Every refusal as ``{"error": message}`` with its status, FastAPI's own ones included."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, err: ApiError) -> JSONResponse:
        return error(err.status, err.message, err.headers)

    @app.exception_handler(QueueFull)
    async def queue_full(request: Request, err: QueueFull) -> JSONResponse:
        return error(429, f"Slowdown: {err}", {"Retry-After": str(err.retry_after)})

    @app.exception_handler(Late)
    async def late(request: Request, err: Late) -> JSONResponse:
        return error(503, str(err), {"Retry-After": str(err.retry_after)})

    @app.exception_handler(Closed)
    async def closed(request: Request, err: Closed) -> JSONResponse:
        return error(503, str(err), {"Connection": "close"})

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, err: HTTPException) -> JSONResponse:
        return error(err.status_code, str(err.detail), err.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, err: RequestValidationError) -> JSONResponse:
        first = err.errors()[0] if err.errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ()))
        return error(400, f"invalid request: {where} {first.get('msg', '')}".strip())


class Guard:
    """ASGI middleware: at most ``limit`` requests at once (None: no limit), and the catch-all."""

    def __init__(self, app: ASGIApp, limit: int | None = None) -> None:
        self.app = app
        self.limit = limit
        self.active = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.limit is not None and self.active >= self.limit:
            busy = f"the server handles {self.limit} requests at once (--limit-concurrency); retry shortly"
            await error(503, busy, {"Retry-After": "1"})(scope, receive, send)
            return
        started = False

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        self.active += 1
        try:
            await self.app(scope, receive, watched_send)
        except Exception as err:  # the catch-all: nothing a client sends gets here, so it is mt's bug
            cause = " ".join(f"{type(err).__name__}: {err}".split())
            path = show(scope["path"], 100)
            logger.error("mt serve: internal error on %s %s: %s", scope["method"], path, cause)
            if not started:  # else the answer is cut off; uvicorn closes the connection
                await error(500, "internal server error")(scope, receive, send)
        finally:
            self.active -= 1
