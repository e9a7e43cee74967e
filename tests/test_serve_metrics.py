"""``/metrics`` (``--metrics``) in-process over a fake engine: scraped after known requests and read
by prometheus_client's own parser, every count equal to what was sent; off by default; the
``--metrics-auth-token`` bearer token; two apps in one process keep their own registries."""

from __future__ import annotations

import asyncio

import httpx
from helpers import UpperEngine, in_process
from prometheus_client.parser import text_string_to_metric_families

from mt_cli.serve.app import Settings, create_app

PAIR = {"source": "de", "target": "en"}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape: (name, sorted labels) -> value, as Prometheus would read it."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_a_scrape_counts_what_was_sent() -> None:
    app = create_app(UpperEngine(), Settings(metrics=True, req_limit=20))
    texts = ["hund", "katze", "maus", "hund", "katze"]  # 3 sentences decoded, 2 from the cache

    async def scenario(http: httpx.AsyncClient) -> httpx.Response:
        for text in texts:  # one after the other: a repeat finds its sentence in the cache
            assert (await http.post("/translate", json={"q": text, **PAIR})).status_code == 200
        bad = {"q": "hund", "source": "xx", "target": "en"}
        assert (await http.post("/translate", json=bad)).status_code == 400
        assert (await http.get("/download_file/nothing")).status_code == 404
        assert (await http.get("/no/such/path")).status_code == 404
        for _ in range(15):  # 20 a minute: 14 more answered, then 429s
            await http.post("/translate", json={"q": "hund", **PAIR})
        return await http.get("/metrics")

    scrape = asyncio.run(in_process(app, scenario))
    assert scrape.status_code == 200 and scrape.headers["content-type"].startswith("text/plain")
    found = samples(scrape.text)
    stats = app.state.batcher.stats

    def value(name: str, **labels: str) -> float:
        return found[(f"mt_serve_{name}", tuple(sorted(labels.items())))]

    assert value("requests_total", route="/translate", status="200") == 5 + 14
    assert value("requests_total", route="/translate", status="400") == 1
    assert value("requests_total", route="/translate", status="429") == 1
    # The route as declared, never the path a client sent.
    assert value("requests_total", route="/download_file/{name}", status="404") == 1
    assert value("requests_total", route="unmatched", status="404") == 1
    assert value("request_duration_seconds_count", route="/translate") == 21
    assert value("limit_refusals_total") == 1
    assert value("sentences_decoded_total") == 3 == stats.lines
    assert value("cache_hits_total") == 2 + 14 and value("cache_misses_total") == 3
    assert value("batches_total") == stats.batches == value("batch_sentences_count")
    assert value("batch_sentences_sum") == 3 and value("batch_pieces_sum") == 6
    assert value("queued_sentences") == value("queued_pieces") == value("pending_requests") == 0
    assert value("late_requests_total") == value("failed_requests_total") == 0
    assert value("dropped_requests_total") == 0
    assert value("worker_restarts_total") == value("warned_sentences_total") == 0


def test_off_by_default_as_in_libretranslate() -> None:
    async def scenario(http: httpx.AsyncClient) -> httpx.Response:
        return await http.get("/metrics")

    answer = asyncio.run(in_process(create_app(UpperEngine(), Settings()), scenario))
    assert answer.status_code == 404


def test_the_auth_token_is_a_bearer_token() -> None:
    app = create_app(UpperEngine(), Settings(metrics=True, metrics_auth_token="s3cret"))

    async def scenario(http: httpx.AsyncClient) -> list[httpx.Response]:
        headers = [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}]
        headers.append({"Authorization": "Bearer s3cret"})
        return [await http.get("/metrics", headers=sent) for sent in headers]

    *refused, allowed = asyncio.run(in_process(app, scenario))
    unauthorized = (401, {"error": "Unauthorized"})
    assert [(answer.status_code, answer.json()) for answer in refused] == [unauthorized] * 3
    assert refused[0].headers["www-authenticate"] == "Bearer"
    assert allowed.status_code == 200 and "mt_serve_requests_total" in allowed.text


def test_two_apps_in_one_process_keep_their_own_counts() -> None:
    first, second = (create_app(UpperEngine(), Settings(metrics=True)) for _ in range(2))

    async def translate_then_scrape(http: httpx.AsyncClient) -> str:
        await http.post("/translate", json={"q": "hund", **PAIR})
        return (await http.get("/metrics")).text

    asyncio.run(in_process(first, translate_then_scrape))
    scraped = asyncio.run(in_process(second, translate_then_scrape))
    key = ("mt_serve_requests_total", (("route", "/translate"), ("status", "200")))
    assert samples(scraped)[key] == 1
