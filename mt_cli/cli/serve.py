"""``mt serve``: the LibreTranslate HTTP API over a trained run (the work is in ``mt_cli.serve``)."""

from __future__ import annotations

import errno
import os
import socket
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from mt_cli.cli.common import BeamOption, LengthPenaltyOption, log, option, user_errors
from mt_cli.cli.engines import DEFAULT_MODEL, ModelChoice, opens_model
from mt_cli.decode.engine import EngineKind
from mt_cli.errors import InputError, RunFailure
from mt_cli.serve.keys import read_keys
from mt_cli.serve.settings import DEFAULT_SETTINGS as DEFAULTS
from mt_cli.serve.settings import Settings

if TYPE_CHECKING:
    from mt_cli.decode.engine import Engine
    from mt_cli.serve.decoders import Decoders

HostOption = option(str, help="Address to listen on (0.0.0.0: every IPv4 interface).")
PortOption = option(int, min=0, max=65535, help="Port to listen on (0: any free one, shown at startup).")
ApiKeysOption = option(
    Path | None,
    "--api-keys",
    help="File of API keys, one a line (a line starting with # is a comment), each optionally with its "
    "own limits: KEY req_limit=N char_limit=N (or KEY N: its requests a minute). Then /translate, "
    "/detect, /suggest and /translate_file need one (403).",
)
MaxCharsOption = option(
    int,
    "--max-chars",
    "--char-limit",
    min=1,
    help="Characters one request may send, all its texts together (400); --char-limit is "
    "LibreTranslate's name for it. A key's char_limit replaces it for that key.",
)
ReqLimitOption = option(
    int,
    "--req-limit",
    min=0,
    help="Requests a minute per client (its API key, else its IP address), over a sliding minute; one "
    "more gets 429 with Retry-After. A key's req_limit replaces it for that key. 0: no limit.",
)
MetricsOption = option(
    bool,
    "--metrics",
    help="Answer GET /metrics: Prometheus's text format (requests, latency, queue, batches).",
)
MetricsAuthTokenOption = option(
    str | None,
    "--metrics-auth-token",
    envvar="MT_METRICS_AUTH_TOKEN",
    show_envvar=True,
    help="Token a /metrics scrape must send as 'Authorization: Bearer TOKEN' (else 401); the variable "
    "keeps it out of the process list.",
)
MaxQueueOption = option(
    int, min=1, help="Distinct sentences waiting for a decoder; a request that does not fit gets 429."
)
MaxQueuePiecesOption = option(
    int, min=1, help="Their source pieces (SentencePiece's); a request that does not fit gets 429."
)
BatchPiecesOption = option(
    int, min=1, help="Source pieces a free decoder takes at most in one batch (what waits, nothing is held)."
)
QueueTimeoutOption = option(
    float, min=0.1, help="Seconds a request may wait for decoding; then it gets 503 and is not decoded."
)
CacheSizeOption = option(
    int, min=0, help="Sentences whose translations are kept and answered again without decoding (0: off)."
)
WorkersOption = option(
    int | None,
    min=0,
    help="Decoding worker processes of the mt engine, one batch each (0: decode in the server's process; "
    "default: one per core on a CPU, 0 on a GPU). The ctranslate2 engine decodes in-process, "
    "its inter_threads batches side by side.",
)
MaxRequestLinesOption = option(
    int | None,
    min=1,
    help="Lines (sentences) one request may send (400 past it), so one request cannot hold the whole queue "
    "(default: half of --max-queue).",
)
TimeoutReadOption = option(
    float,
    min=0.1,
    help="Seconds a client has to send a request's headers (else the connection is closed), "
    "and again its body (else 408).",
)
TimeoutKeepAliveOption = option(float, min=0.1, help="Seconds an idle connection is kept open.")
TimeoutGracefulShutdownOption = option(
    float,
    min=0.0,
    help="Seconds from SIGTERM to exit: accepted requests are answered within it, the rest get 503.",
)
AlternativesLimitOption = option(
    int,
    min=0,
    help="Alternatives a /translate request may ask for (400 past it; 0: none). N alternatives "
    "decode an n-best list of N+1 in a beam of at least N+1.",
)
SuggestionsOption = option(
    Path | None,
    "--suggestions",
    help="SQLite database where POST /suggest stores users' corrections (created if missing), for "
    "training with a data.corpora entry of source: suggestions. Without it /suggest answers 403.",
)
MaxFileSizeOption = option(
    int,
    min=0,
    help="Bytes of a file POST /translate_file takes (413 past it); 0 turns file translation off (403).",
)
FileTtlOption = option(
    float,
    "--file-ttl",
    min=1.0,
    help="Seconds a translated file is kept for its download (it is removed at its first download).",
)
LimitConcurrencyOption = option(
    int | None, min=1, help="Requests handled at once; more get 503 (default: no limit but the queue)."
)
LISTEN_BACKLOG = 2048  # uvicorn's default: connections made while the model loads wait here


@user_errors
@opens_model
def serve(
    choice: ModelChoice = DEFAULT_MODEL,
    host: HostOption = "127.0.0.1",
    port: PortOption = 5000,
    api_keys: ApiKeysOption = None,
    # The rest are Settings' fields: their defaults are its own.
    beam: BeamOption = DEFAULTS.options.beam,
    length_penalty: LengthPenaltyOption = DEFAULTS.options.length_penalty,
    alternatives_limit: AlternativesLimitOption = DEFAULTS.alternatives_limit,
    max_chars: MaxCharsOption = DEFAULTS.max_chars,
    workers: WorkersOption = None,
    max_queue: MaxQueueOption = DEFAULTS.max_queue,
    max_queue_pieces: MaxQueuePiecesOption = DEFAULTS.max_queue_pieces,
    batch_pieces: BatchPiecesOption = DEFAULTS.batch_pieces,
    queue_timeout: QueueTimeoutOption = DEFAULTS.queue_timeout,
    cache_size: CacheSizeOption = DEFAULTS.cache_size,
    max_request_lines: MaxRequestLinesOption = DEFAULTS.max_request_lines,
    timeout_read: TimeoutReadOption = DEFAULTS.timeout_read,
    timeout_keep_alive: TimeoutKeepAliveOption = DEFAULTS.timeout_keep_alive,
    timeout_graceful_shutdown: TimeoutGracefulShutdownOption = DEFAULTS.timeout_graceful_shutdown,
    limit_concurrency: LimitConcurrencyOption = DEFAULTS.limit_concurrency,
    suggestions: SuggestionsOption = DEFAULTS.suggestions,
    max_file_size: MaxFileSizeOption = DEFAULTS.max_file_size,
    file_ttl: FileTtlOption = DEFAULTS.file_ttl,
    req_limit: ReqLimitOption = DEFAULTS.req_limit,
    metrics: MetricsOption = DEFAULTS.metrics,
    metrics_auth_token: MetricsAuthTokenOption = DEFAULTS.metrics_auth_token,
) -> None:
    """Serve the LibreTranslate HTTP API over a trained run, and a page to try it at /.

    Endpoints: POST /translate, /detect, /suggest and /translate_file (.txt, .html, .srt, .docx,
    .pptx, .odt, .odp, .epub); GET /download_file/NAME, /languages, /frontend/settings, /health
    and, with --metrics, /metrics.

    Concurrent requests are decoded together; --ensemble serves several runs combined, as
    `mt translate` decodes them. SIGTERM answers the accepted requests within
    --timeout-graceful-shutdown, then exits 0.

    Exit codes: 2 a bad option (a --beam or --alternatives-limit too wide for the model included),
    --api-keys file or --suggestions database; 3 the port is in use or the server failed; 130 Ctrl-C.
    """
    from mt_cli.documents.sentences import segmenter

    segmenter()  # every text is split into sentences: a missing sentencex stops it now, in one line
    options = replace(DEFAULTS.options, beam=beam, length_penalty=length_penalty)
    keys = read_keys(api_keys) if api_keys is not None else {}
    _check_metrics(metrics, metrics_auth_token)
    worker_count = _worker_count(choice, workers)  # a --workers the engine cannot have fails now
    if suggestions is not None:  # checked (and made) now, not after the model has loaded
        from mt_cli.data.suggestions import open_for_writing

        open_for_writing(suggestions).close()
    listener = _listen(host, port)  # before the model loads, so a port in use fails at once
    try:
        from mt_cli.config.card import describe_directions
        from mt_cli.serve.alternatives import decode_options
        from mt_cli.serve.app import create_app
        from mt_cli.serve.server import serve as run_server

        model = choice.open(processes=1).engine
        # What every request, and one with the most alternatives, decodes with: refused now if the
        # engine must (a beam too wide for its vocabulary), never as a 500 per request.
        resolved = model.resolve(options)
        model.resolve(decode_options(alternatives_limit, options, model.beam_size))
        settings = Settings(
            max_chars=max_chars,
            max_queue=max_queue,
            max_queue_pieces=max_queue_pieces,
            max_request_lines=max_request_lines,
            batch_pieces=batch_pieces,
            queue_timeout=queue_timeout,
            cache_size=cache_size,
            options=options,
            alternatives_limit=alternatives_limit,
            api_keys=keys,
            timeout_read=timeout_read,
            timeout_keep_alive=timeout_keep_alive,
            timeout_graceful_shutdown=timeout_graceful_shutdown,
            limit_concurrency=limit_concurrency,
            suggestions=suggestions,
            max_file_size=max_file_size,
            file_ttl=file_ttl,
            req_limit=req_limit,
            metrics=metrics,
            metrics_auth_token=metrics_auth_token,
        )
        url = _url(listener)
        directions = describe_directions(model.directions)
        decoding = (
            f"{choice.engine.value} engine, beam {resolved.beam_size}, length penalty {resolved.alpha:g}, "
            f"{_describe_workers(worker_count)}"
        )
        stored = f"; suggestions stored in {suggestions}" if suggestions is not None else ""
        ready = f"mt serve: {directions} at {url} ({decoding}, {model.origin}){stored}"
        # Forked now, before the server starts any thread (workers.py says why).
        decoders = _decoders(model, worker_count, listener)
        app = create_app(model, settings, on_ready=lambda: log(ready), decoders=decoders)
        if not run_server(app, listener, settings):
            raise RunFailure("the server did not start; see the messages above")
    finally:
        listener.close()


def _worker_count(choice: ModelChoice, workers: int | None) -> int:
    """The decoding worker processes to start: ``--workers``, by default one per core for the mt
    engine on a Linux CPU; 0 elsewhere. A one-line error where workers cannot be."""
    from mt_cli.decode.processes import available
    from mt_cli.runtime.device import resolve_device

    on_cpu = choice.engine is EngineKind.MT and resolve_device(choice.device).type == "cpu" and available()
    if workers is None:
        return len(os.sched_getaffinity(0)) if on_cpu else 0
    if workers > 0 and not on_cpu:
        raise InputError(
            "--workers needs the mt engine on a Linux CPU; the ctranslate2 engine decodes its "
            "inter_threads batches side by side in-process, and a GPU is one device"
        )
    return workers


def _decoders(model: Engine, count: int, listener: socket.socket) -> Decoders | None:
    """``count`` decoding worker processes of ``model``; None (decode in this process) for 0."""
    if count == 0:
        return None
    from mt_cli.serve.alternatives import decoder
    from mt_cli.serve.workers import WorkerPool

    return WorkerPool(decoder(model), count, close_in_children=[listener])


def _describe_workers(count: int) -> str:
    return f"{count} decoding worker process{'es' if count != 1 else ''}" if count else "decoding in-process"


def _check_metrics(metrics: bool, token: str | None) -> None:
    """A one-line error now, not after the model loads, for --metrics without its library or a
    token that could not be sent."""
    import importlib.util

    if metrics and importlib.util.find_spec("prometheus_client") is None:
        raise InputError('--metrics needs the prometheus_client package: pip install -e ".[serve]"')
    if token is not None and (not token or any(char.isspace() for char in token)):
        raise InputError("--metrics-auth-token must be one word: no spaces, not empty")
    if token is not None and not metrics:
        raise InputError("--metrics-auth-token protects /metrics: give --metrics too")


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening, or a RunFailure naming what is in the way."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as err:
        raise InputError(f"--host {host}: {err.strerror}") from None
    listener = socket.socket(family, kind, proto)
    # As uvicorn does: a restarted server need not wait for the old connections' TIME_WAIT.
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
        listener.listen(LISTEN_BACKLOG)
    except OSError as err:
        listener.close()
        if err.errno == errno.EADDRINUSE:
            raise RunFailure(
                f"port {port} on {host} is in use; stop what listens there or pick another --port"
            ) from None
        raise RunFailure(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    return listener


def _url(listener: socket.socket) -> str:
    host, port = listener.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def register(app: typer.Typer) -> None:
    app.command()(serve)
