"""The FastAPI app: LibreTranslate's endpoints over one engine, its requests micro-batched.

Endpoints (LibreTranslate's schemas): ``POST /translate``, ``POST /detect``, ``GET /languages``,
``GET /frontend/settings``, plus ``GET /health`` and the page at ``/``. Every error answer is
``{"error": message}``: 400 bad input (FastAPI's own 422 included), 403 key, 404/405 route,
413 body too big, 429 queue full, 503 stopping; 500 only when the engine itself fails.
"""

from __future__ import annotations

import functools
import importlib.resources
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException

from mt_cli.decode.engine import Engine
from mt_cli.serve import api
from mt_cli.serve.batcher import Batcher, Closed, QueueFull

logger = logging.getLogger("mt.serve")

# English names for the codes a LibreTranslate client shows; any other code is shown as itself.
LANGUAGE_NAMES = {
    "ar": "Arabic", "cs": "Czech", "de": "German", "en": "English", "es": "Spanish", "fr": "French",
    "it": "Italian", "ja": "Japanese", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese",
    "ru": "Russian", "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip
FRONTEND_TIMEOUT_MS = 500  # LibreTranslate's default pause after typing before its page translates


@dataclass(frozen=True)
class Settings:
    """What ``mt serve``'s options set; the defaults are the command's."""

    max_chars: int = 5000  # characters of one request's q, all texts together
    max_queue: int = 1024  # lines accepted and waiting for the engine; more is a 429
    batch_wait_ms: float = 5.0  # how long the batcher waits for more requests after the first
    batch_lines: int = 256  # lines that close a batch before the wait is over
    beam_size: int | None = None  # None: the engine's own (the model card's)
    api_keys: frozenset[str] = frozenset()  # empty: no key needed

    @property
    def max_body(self) -> int:
        """Bytes of a request body: 12 per character (a 4-byte character %-encoded in a form is
        12 bytes, escaped in JSON as a surrogate pair also 12) plus 16 KiB for the other fields."""
        return 12 * self.max_chars + (16 << 10)


def create_app(engine: Engine, settings: Settings, on_ready: Callable[[], None] | None = None) -> FastAPI:
    """The server for ``engine``; ``on_ready`` runs once the batcher runs, before the first request."""
    translate_lines = functools.partial(engine.translate_lines, beam_size=settings.beam_size)
    batcher = Batcher(
        translate_lines,
        settings.max_queue,
        settings.batch_wait_ms / 1000,
        settings.batch_lines,
        engine.parallel_batches,
    )
    pair = api.Pair(engine.src_lang, engine.tgt_lang, settings.max_chars, settings.max_queue)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await batcher.start()
        if on_ready is not None:
            on_ready()
        try:
            yield
        finally:
            # uvicorn has waited for the open requests; anything still queued is answered first.
            await batcher.close()

    app = FastAPI(title="mt serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.batcher = batcher
    # LibreTranslate answers every origin, so pages and browser extensions elsewhere can call it.
    app.add_middleware(
        CORSMiddleware, allow_origins=["*"], allow_methods=["GET", "POST"], allow_headers=["*"]
    )
    _add_error_handlers(app)
    _add_api_routes(app, batcher, pair, settings)
    _add_info_routes(app, batcher, pair, settings)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Every refusal as ``{"error": message}`` with its status, FastAPI's own ones included."""

    def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    @app.exception_handler(api.ApiError)
    async def api_error(request: Request, err: api.ApiError) -> JSONResponse:
        return error(err.status, err.message)

    @app.exception_handler(QueueFull)
    async def queue_full(request: Request, err: QueueFull) -> JSONResponse:
        return error(429, f"Slowdown: {err}", {"Retry-After": "1"})

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


def _add_api_routes(app: FastAPI, batcher: Batcher, pair: api.Pair, settings: Settings) -> None:
    @app.post("/translate")
    async def translate(request: Request) -> dict[str, Any]:
        fields = await api.read_fields(request, settings.max_body)
        api.check_key(fields, settings.api_keys)
        job = api.parse_translate(fields, pair)
        try:
            outputs = await batcher.translate(job.lines())
        except (QueueFull, Closed):
            raise
        except Exception as err:  # the engine failed on input that passed every check: a bug, logged
            logger.exception("translation failed")
            raise api.ApiError(500, f"Cannot translate text: {err}") from None
        return job.answer(outputs, pair.source)

    @app.post("/detect")
    async def detect(request: Request) -> list[dict[str, Any]]:
        fields = await api.read_fields(request, settings.max_body)
        api.check_key(fields, settings.api_keys)
        api.parse_detect(fields, pair)
        return [{"confidence": api.CONFIDENCE, "language": pair.source}]


def _add_info_routes(app: FastAPI, batcher: Batcher, pair: api.Pair, settings: Settings) -> None:
    page = importlib.resources.files("mt_cli.serve").joinpath("page.html").read_text(encoding="utf-8")

    @app.get("/", response_class=HTMLResponse)
    async def index() -> str:
        return page

    @app.get("/languages")
    async def languages() -> list[dict[str, Any]]:
        return [
            {"code": pair.source, "name": _name(pair.source), "targets": [pair.target]},
            {"code": pair.target, "name": _name(pair.target), "targets": []},
        ]

    @app.get("/frontend/settings")
    async def frontend_settings() -> dict[str, Any]:
        keys = bool(settings.api_keys)
        return {
            "charLimit": settings.max_chars,
            "frontendTimeout": FRONTEND_TIMEOUT_MS,
            "apiKeys": keys,
            "keyRequired": keys,
            "suggestions": False,
            "filesTranslation": False,
            "supportedFilesFormat": [],
            "language": {
                "source": {"code": pair.source, "name": _name(pair.source)},
                "target": {"code": pair.target, "name": _name(pair.target)},
            },
        }

    @app.get("/health")
    async def health() -> dict[str, Any]:
        stats = batcher.stats
        return {
            "status": "ok",
            "source": pair.source,
            "target": pair.target,
            "queuedLines": batcher.queued_lines,
            "pendingRequests": batcher.pending_requests,
            "batches": stats.batches,
            "requests": stats.requests,
            "lines": stats.lines,
            "largestBatch": stats.largest_batch,
        }


def _name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)
