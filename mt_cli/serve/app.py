"""The FastAPI app: LibreTranslate's endpoints over one engine, its requests' sentences pooled
and decoded together (``batcher``).

Endpoints (LibreTranslate's schemas): ``POST /translate``, ``POST /detect``, ``POST /suggest``
(``suggestions.py``; 403 unless ``--suggestions`` names a database), ``POST /translate_file`` and
``GET /download_file/<name>`` (``files.py``), ``GET /languages``, ``GET /frontend/settings``
(LibreTranslate's keys, plus ``alternativesLimit``, which mt's page reads to ask for alternatives),
plus ``GET /health``, ``GET /metrics`` with ``--metrics`` (``metrics.py``) and the page at ``/``
(each GET answers HEAD too, as load balancers probe). Every error answer is ``{"error": message}``
(``handlers.py``): 400 bad input, 403 key, 404/405 route, 408 body too slow, 413 body too big, 429
queue full or over ``--req-limit`` (``access.py``: the routes that translate declare its key and
limits check as a dependency), 503 stopping or over ``--limit-concurrency``; 500 only for mt's own
failures. ``app.state.files`` is the directory of translated files (``files.FileStore``).

A request's body is read under the size limit and the read timeout (``body.py``); while it waits
for the batcher, a client that hangs up cancels it, and its lines leave the queue undecoded.
``app.state.stop()`` begins a stop (``server.py`` calls it on SIGTERM): bodies still arriving
are answered 503, queued requests are decoded within the grace period, the rest answered 503.
"""

from __future__ import annotations

import asyncio
import importlib.resources
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse

from mt_cli.config.options import TranslateOptions
from mt_cli.decode.engine import Engine
from mt_cli.documents.filetypes import EXTENSIONS
from mt_cli.errors import InputError
from mt_cli.serve import alternatives, body, detect, files, parse, suggestions
from mt_cli.serve.access import Access, Caller
from mt_cli.serve.batcher import Batcher
from mt_cli.serve.decoders import Decoders, InProcess
from mt_cli.serve.errors import ApiError
from mt_cli.serve.handlers import Guard, add_error_handlers
from mt_cli.serve.job import Job, Translating
from mt_cli.serve.scope import Scope
from mt_cli.serve.settings import Settings

logger = logging.getLogger("mt.serve")

# English names for the codes a LibreTranslate client shows; any other code is shown as itself.
LANGUAGE_NAMES = {
    "ar": "Arabic", "cs": "Czech", "de": "German", "en": "English", "es": "Spanish", "fr": "French",
    "it": "Italian", "ja": "Japanese", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese",
    "ru": "Russian", "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip
FRONTEND_TIMEOUT_MS = 500  # LibreTranslate's default pause after typing before its page translates


def create_app(
    engine: Engine,
    settings: Settings,
    on_ready: Callable[[], None] | None = None,
    decoders: Decoders | None = None,
) -> FastAPI:
    """The server for ``engine``; ``on_ready`` runs once the batcher runs, before the first request.
    ``decoders``: where its batches are decoded (``workers.WorkerPool``; None: in this process,
    ``engine.parallel_batches`` at once), closed with the server."""
    # Keyed by the requests' options: one engine call decodes with one beam and n-best, into one
    # language.
    batcher: Batcher[TranslateOptions, alternatives.Decoded] = Batcher(
        decoders or InProcess(alternatives.decoder(engine), engine.parallel_batches),
        engine.count_pieces,
        settings.max_queue,
        settings.max_queue_pieces,
        settings.batch_pieces,
        settings.queue_timeout,
        settings.cache_size,
        warnings=lambda decoded: decoded.warnings,
    )
    scope = Scope(
        engine.src_lang,
        engine.tgt_lang,
        settings.max_chars,
        settings.request_lines,
        settings.alternatives_limit,
        tuple(engine.directions),
    )
    stopping = asyncio.Event()
    store = suggestions.Store(settings.suggestions)
    translated_files = files.FileStore(settings.file_ttl)
    # python-multipart logs a warning for each malformed multipart body: a client's mistake,
    # already answered 400, and any client could fill the log with them.
    logging.getLogger("python_multipart").setLevel(logging.ERROR)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await store.start()  # first: a database that cannot be opened stops the start before the rest
        await batcher.start()
        await translated_files.start()
        if on_ready is not None:
            on_ready()
        try:
            yield
        finally:
            # uvicorn has waited for the open requests; anything still queued is answered first.
            await batcher.close()
            batcher.decoders.close()
            await store.close()
            await translated_files.close()  # every file not downloaded yet, and the directory

    def stop() -> None:
        """Begin a stop: no more bodies read, the queue answered within the grace period."""
        stopping.set()
        batcher.drain(settings.timeout_graceful_shutdown)

    app = FastAPI(title="mt serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.batcher = batcher
    app.state.stop = stop
    app.state.files = translated_files
    access = app.state.access = Access(settings.api_keys, settings.req_limit, settings.max_chars)
    # Added first, so it sits inside CORS: its 500 and 503 answers carry the CORS headers too.
    app.add_middleware(Guard, limit=settings.limit_concurrency)
    if settings.metrics:  # outside the Guard, to count its answers; inside CORS, as the routes
        from mt_cli.serve import metrics

        app.state.metrics = metrics.Metrics(batcher, access)
        metrics.add_metrics(app, app.state.metrics, settings.metrics_auth_token)
    # LibreTranslate answers every origin, so pages and browser extensions elsewhere can call it.
    app.add_middleware(
        CORSMiddleware, allow_origins=["*"], allow_methods=["GET", "HEAD", "POST"], allow_headers=["*"]
    )
    add_error_handlers(app)

    async def read(request: Request, limit: int) -> bytes:
        return await body.read_body(request.receive, request.headers, limit, settings.timeout_read, stopping)

    async def read_fields(request: Request) -> dict[str, Any]:
        return await parse.read_fields(request, await read(request, settings.max_body))

    detector = detect.Detector([code for direction in scope.directions for code in direction])
    if unknown := [source for source in scope.sources if not detector.knows(source)]:
        logger.warning(
            "mt serve: source auto and /detect cannot check %s: no language detector knows it", unknown
        )
    translating = Translating(batcher, detector, scope)
    _add_api_routes(app, engine, translating, settings, read_fields, access.admission(read_fields))
    suggestions.add_route(app, store, scope, access, read_fields)
    files.add_routes(
        app, translated_files, engine, translating, read, settings.max_file_size, access, settings.options
    )
    _add_info_routes(app, batcher, scope, settings)
    return app


def _add_api_routes(
    app: FastAPI,
    engine: Engine,
    translating: Translating,
    settings: Settings,
    read_fields: Callable[[Request], Awaitable[dict[str, Any]]],
    admit: Callable[..., Awaitable[Caller]],
) -> None:
    """``read_fields`` and ``admit`` are the routes' dependencies: the body read once, then the
    key and the limits checked (``access.py``)."""
    scope = translating.scope

    @app.post("/translate")
    async def translate(
        request: Request, fields: dict[str, Any] = Depends(read_fields), caller: Caller = Depends(admit)
    ) -> dict[str, Any]:
        asked = parse.parse_translate(fields, replace(scope, max_chars=caller.char_limit))
        target = asked.target or scope.target
        glossary, mode = parse.parse_glossary(fields, asked.languages[0], target)
        try:  # checked before it is queued: options the engine cannot decode with are the client's
            options = engine.resolve(asked.options(settings.options, engine.beam_size))
            options = options.with_glossary(glossary, mode)
            if glossary is not None:  # an engine is asked about terms only when a request has some
                engine.check_terms(options)
        except InputError as err:
            raise ApiError(400, f"invalid request: {err}") from None
        job = Job(asked.read, asked.languages, asked.auto, target, "text", scope.max_lines)
        done = await translating.run(job, options, request.receive)
        return asked.answer(done.documents, done.hypotheses, [guess.answer() for guess in done.detected])

    @app.post("/detect")
    async def detect_language(
        fields: dict[str, Any] = Depends(read_fields), caller: Caller = Depends(admit)
    ) -> list[dict[str, Any]]:
        # A list of texts is detected as one.
        text = "\n".join(parse.parse_detect(fields, replace(scope, max_chars=caller.char_limit)))
        return [
            guess.answer()
            for guess in await asyncio.to_thread(detect.detect, translating.detector, text, scope)
        ]


def _add_info_routes(
    app: FastAPI,
    batcher: Batcher[TranslateOptions, alternatives.Decoded],
    scope: Scope,
    settings: Settings,
) -> None:
    page = importlib.resources.files("mt_cli.serve").joinpath("page.html").read_text(encoding="utf-8")

    @app.api_route("/", methods=["GET", "HEAD"], response_class=HTMLResponse)
    async def index() -> str:
        return page

    @app.api_route("/languages", methods=["GET", "HEAD"])
    async def languages() -> list[dict[str, Any]]:
        return languages_of(scope.directions)

    @app.api_route("/frontend/settings", methods=["GET", "HEAD"])
    async def frontend_settings() -> dict[str, Any]:
        keys = bool(settings.api_keys)
        return {
            "charLimit": settings.max_chars,
            "frontendTimeout": FRONTEND_TIMEOUT_MS,
            "apiKeys": keys,
            "keyRequired": keys,
            "suggestions": settings.suggestions is not None,
            "filesTranslation": settings.max_file_size > 0,
            "supportedFilesFormat": list(EXTENSIONS) if settings.max_file_size > 0 else [],
            "alternativesLimit": settings.alternatives_limit,  # mt's own key: LibreTranslate has none
            "language": {
                "source": {"code": scope.source, "name": _name(scope.source)},
                "target": {"code": scope.target, "name": _name(scope.target)},
            },
        }

    @app.api_route("/health", methods=["GET", "HEAD"])
    async def health() -> dict[str, Any]:
        stats = batcher.stats
        return {
            "status": "ok",
            "source": scope.source,
            "target": scope.target,
            "queuedLines": batcher.queued_lines,
            "queuedPieces": batcher.queued_pieces,
            "pendingRequests": batcher.pending_requests,
            "batches": stats.batches,
            "requests": stats.requests,
            "lines": stats.lines,
            "largestBatch": stats.largest_batch,
            "retriedBatches": stats.retried_batches,
            "failedRequests": stats.failed_requests,
            "droppedRequests": stats.dropped_requests,
            "lateRequests": stats.late_requests,
            "warnedLines": stats.warned_lines,
            "cacheHits": batcher.cache.hits,
            "cacheMisses": batcher.cache.misses,
            "decoders": batcher.decoders.parallel,
            "workerPids": batcher.decoders.pids,
            "workerRestarts": batcher.decoders.restarts,
        }


def _name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


def languages_of(directions: tuple[tuple[str, str], ...]) -> list[dict[str, Any]]:
    """LibreTranslate's ``/languages``: every language of the directions, in order of first use,
    each with the targets it translates into (a language only written has none)."""
    codes = dict.fromkeys(code for direction in directions for code in direction)
    return [
        {"code": code, "name": _name(code), "targets": [tgt for src, tgt in directions if src == code]}
        for code in codes
    ]
