"""``GET /metrics`` (``--metrics``, off by default as LibreTranslate's): the server's counts in
Prometheus's text format (or OpenMetrics, if the scraper asks for it), by prometheus_client, on
the app's own registry: several apps in one process (the tests) never share one.

Every name starts ``mt_serve_``:

* ``requests_total{route,status}`` and ``request_duration_seconds{route}`` (a histogram): every
  answer, counted outside the concurrency guard so that its 503s and 500s count too; ``route`` is
  the route's path as declared (``/download_file/{name}``, never a client's path), ``unmatched``
  for a path no route has and for the guard's 503s (answered before any route is matched);
  ``status`` 499 (nginx's) for a client that left before any answer.
* ``queued_sentences``, ``queued_pieces``, ``pending_requests`` (gauges): the batcher's queue.
* ``batch_sentences``, ``batch_pieces``, ``batch_duration_seconds`` (histograms): each engine
  call.
* ``sentences_decoded_total`` (its ``rate()`` is sentences a second), ``batches_total``,
  ``cache_hits_total``, ``cache_misses_total``, ``late_requests_total``,
  ``failed_requests_total``, ``dropped_requests_total``, ``worker_restarts_total``,
  ``limit_refusals_total`` (429s for ``--req-limit``), ``warned_sentences_total`` (sentences the
  engine warned of, each logged: placeholders mended, a source cut to the model's positions).

Gauges and the batcher's counters are read when scraped (a collector), never copied on the hot
path. ``--metrics-auth-token T``: a scrape must send ``Authorization: Bearer T``; any other is
LibreTranslate's 401 ``Unauthorized``.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Iterator, Sequence
from typing import Any

from fastapi import FastAPI, Request, Response
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mt_cli.serve.access import Access
from mt_cli.serve.batcher import Batcher
from mt_cli.serve.errors import ApiError

PREFIX = "mt_serve_"
UNMATCHED = "unmatched"  # the route label of a path no route has: a client's path is no label
LEFT = "499"  # the status label of a request whose client left before any answer (nginx's)
LATENCY_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_SENTENCES = tuple(float(2**n) for n in range(11))  # 1 to 1024
BATCH_PIECES = tuple(float(4**n) for n in range(2, 9))  # 16 to 65536
BATCH_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The app's registry: what the middleware and the batcher report, and what is read at scrape."""

    def __init__(self, batcher: Batcher[Any, Any], access: Access) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            f"{PREFIX}requests", "Requests answered", ["route", "status"], registry=self.registry
        )
        self.latency = self._histogram(
            "request_duration_seconds", "Seconds from a request's arrival to its answer", LATENCY_S, ["route"]
        )
        self.batch_sentences = self._histogram(
            "batch_sentences", "Sentences of each engine call", BATCH_SENTENCES
        )
        self.batch_pieces = self._histogram("batch_pieces", "Source pieces of each engine call", BATCH_PIECES)
        self.batch_seconds = self._histogram("batch_duration_seconds", "Seconds of each engine call", BATCH_S)
        self.registry.register(_Reading(batcher, access))
        batcher.on_batch.append(self.observe_batch)

    def _histogram(
        self, name: str, text: str, buckets: tuple[float, ...], labels: Sequence[str] = ()
    ) -> Histogram:
        return Histogram(f"{PREFIX}{name}", text, labels, buckets=buckets, registry=self.registry)

    def observe_request(self, route: str, status: str, seconds: float) -> None:
        self.requests.labels(route, status).inc()
        self.latency.labels(route).observe(seconds)

    def observe_batch(self, sentences: int, pieces: int, seconds: float) -> None:
        self.batch_sentences.observe(sentences)
        self.batch_pieces.observe(pieces)
        self.batch_seconds.observe(seconds)


class _Reading:
    """The batcher's and the limits' own counts, read at each scrape."""

    def __init__(self, batcher: Batcher[Any, Any], access: Access) -> None:
        self.batcher = batcher
        self.access = access

    def collect(self) -> Iterator[Metric]:
        batcher, stats = self.batcher, self.batcher.stats
        gauges = {
            "queued_sentences": ("Distinct sentences waiting for a decoder", batcher.queued_lines),
            "queued_pieces": ("Their source pieces", batcher.queued_pieces),
            "pending_requests": ("Requests waiting for their translations", batcher.pending_requests),
        }
        for name, (text, value) in gauges.items():
            yield GaugeMetricFamily(f"{PREFIX}{name}", text, value=value)
        counters = {
            "sentences_decoded": ("Sentences decoded (cache hits are not)", stats.lines),
            "batches": ("Engine calls", stats.batches),
            "cache_hits": ("Sentences answered from the cache", batcher.cache.hits),
            "cache_misses": ("Sentences looked up in the cache and not found", batcher.cache.misses),
            "late_requests": ("Requests past their deadline before decoding (503)", stats.late_requests),
            "failed_requests": ("Requests the engine failed on (500)", stats.failed_requests),
            "dropped_requests": ("Requests whose client left before their answer", stats.dropped_requests),
            "worker_restarts": ("Decoding worker processes restarted", batcher.decoders.restarts),
            "limit_refusals": ("Requests refused for --req-limit (429)", self.access.refused),
            "warned_sentences": ("Sentences the engine warned of (logged)", stats.warned_lines),
        }
        for name, (text, value) in counters.items():
            yield CounterMetricFamily(f"{PREFIX}{name}", text, value=value)


class Measure:
    """ASGI middleware: each request's route, status and seconds into ``metrics``."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = LEFT
        started = time.perf_counter()

        async def watched_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = str(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watched_send)
        finally:
            # The router put the matched route in the scope: its declared path is the label.
            route = getattr(scope.get("route"), "path", UNMATCHED)
            self.metrics.observe_request(route, status, time.perf_counter() - started)


def add_metrics(app: FastAPI, metrics: Metrics, token: str | None) -> None:
    """The middleware (call it where it belongs among the app's middleware) and ``GET /metrics``."""
    app.add_middleware(Measure, metrics=metrics)

    @app.api_route("/metrics", methods=["GET", "HEAD"])
    async def scrape(request: Request) -> Response:
        if token is not None and not _authorized(request.headers.get("authorization", ""), token):
            raise ApiError(401, "Unauthorized", {"WWW-Authenticate": "Bearer"})
        encode, media_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(metrics.registry), media_type=media_type)


def _authorized(header: str, token: str) -> bool:
    # compare_digest: the time taken tells nothing of how much of a guess was right.
    return hmac.compare_digest(header.encode(), f"Bearer {token}".encode())
