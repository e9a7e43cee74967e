"""The app in-process over a fake engine: what a real model cannot be made to do on demand."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from helpers import in_process

from mt_cli.config.options import TranslateOptions
from mt_cli.serve import parse
from mt_cli.serve.app import Settings, create_app
from mt_cli.serve.scope import Scope

PAIR = {"source": "de", "target": "en"}


class BrokenEngine:
    """An engine for de -> en that fails on the line "boom" and upper-cases the rest."""

    src_lang, tgt_lang, beam_size, origin, parallel_batches = "de", "en", 4, "a fake", 1

    def count_pieces(self, lines: list[str]) -> list[int]:
        return [len(line.split()) + 1 for line in lines]

    directions = (("de", "en"),)

    def __init__(self) -> None:
        self.gate = threading.Event()  # cleared: every call waits for it (at most 5 s)
        self.gate.set()
        self.calls: list[list[str]] = []

    def resolve(self, options: TranslateOptions) -> TranslateOptions:
        return options

    def translate_lines(self, lines: Sequence[str], options: TranslateOptions, **_: object) -> list[str]:
        self.gate.wait(5)
        self.calls.append(list(lines))
        if "boom" in lines:
            raise RuntimeError("the engine broke")
        return [line.upper() for line in lines]


def test_an_engine_failure_fails_its_request_alone_and_logs_one_line(caplog) -> None:
    engine = BrokenEngine()
    app = create_app(engine, Settings())

    async def scenario(http: httpx.AsyncClient) -> list[httpx.Response]:
        posts = [http.post("/translate", json={"q": q, **PAIR}) for q in ["hund", "boom", "katze\nmaus"]]
        return await asyncio.gather(*posts)

    with caplog.at_level(logging.WARNING):
        good, failed, other = asyncio.run(in_process(app, scenario))
    assert ["boom"] in engine.calls  # decoded alone at the end, whatever batch it came in
    assert (good.status_code, good.json()) == (200, {"translatedText": "HUND"})
    assert (other.status_code, other.json()) == (200, {"translatedText": "KATZE\nMAUS"})
    assert (failed.status_code, failed.json()) == (500, {"error": "Cannot translate text: the engine broke"})
    assert [(r.name, r.levelname, r.exc_info) for r in caplog.records] == [("mt.serve", "ERROR", None)]
    assert "\n" not in caplog.records[0].getMessage()


def test_a_bug_in_mt_is_a_500_json_and_one_log_line_not_a_traceback(caplog, monkeypatch) -> None:
    def broken(fields: dict[str, Any], scope: Scope) -> parse.TranslateRequest:
        raise KeyError("a bug")

    monkeypatch.setattr(parse, "parse_translate", broken)
    with caplog.at_level(logging.WARNING), TestClient(create_app(BrokenEngine(), Settings())) as client:
        answer = client.post("/translate", json={"q": "hund", **PAIR})
        assert client.post("/detect", json={"q": "hund"}).status_code == 200  # the server goes on
    assert (answer.status_code, answer.json()) == (500, {"error": "internal server error"})
    assert [(r.levelname, r.exc_info) for r in caplog.records] == [("ERROR", None)]
    assert caplog.records[0].getMessage() == "mt serve: internal error on POST /translate: KeyError: 'a bug'"


def test_past_limit_concurrency_a_request_gets_503_json() -> None:
    engine = BrokenEngine()
    engine.gate.clear()
    app = create_app(engine, Settings(limit_concurrency=1))

    async def scenario(http: httpx.AsyncClient) -> tuple[httpx.Response, httpx.Response]:
        held = asyncio.ensure_future(http.post("/translate", json={"q": "hund", **PAIR}))
        while app.state.batcher.pending_requests == 0:
            await asyncio.sleep(0.01)
        refused = await http.get("/health")
        engine.gate.set()
        return await held, refused

    held, refused = asyncio.run(in_process(app, scenario))
    assert held.json() == {"translatedText": "HUND"}
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert "--limit-concurrency" in refused.json()["error"]


async def _stalled_body(arrived: asyncio.Event, release: asyncio.Event) -> AsyncIterator[bytes]:
    yield b'{"q": "hu'
    arrived.set()
    await release.wait()
    yield b'nd", "source": "de", "target": "en"}'


def test_a_body_that_stalls_past_the_read_timeout_gets_408() -> None:
    app = create_app(BrokenEngine(), Settings(timeout_read=0.3))

    async def scenario(http: httpx.AsyncClient) -> httpx.Response:
        arrived, never = asyncio.Event(), asyncio.Event()
        return await http.post("/translate", content=_stalled_body(arrived, never))

    answer = asyncio.run(in_process(app, scenario))
    assert answer.status_code == 408 and answer.headers["connection"] == "close"
    assert answer.json() == {"error": "the request body did not arrive within 0.3 s"}


def test_a_stop_answers_503_to_bodies_still_arriving_and_to_new_requests() -> None:
    app = create_app(BrokenEngine(), Settings(timeout_read=10))

    async def scenario(http: httpx.AsyncClient) -> tuple[httpx.Response, httpx.Response]:
        arrived, never = asyncio.Event(), asyncio.Event()
        stalled = asyncio.ensure_future(http.post("/translate", content=_stalled_body(arrived, never)))
        await arrived.wait()
        app.state.stop()
        late = await http.post("/translate", json={"q": "hund", **PAIR})
        return await asyncio.wait_for(stalled, 2), late

    stalled, late = asyncio.run(in_process(app, scenario))
    assert stalled.status_code == 503 and stalled.json() == {
        "error": "the server is stopping; send the request again"
    }
    assert late.status_code == 503 and late.json() == {"error": "the server is stopping"}


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_every_info_route_answers_get_and_head(method: str) -> None:
    with TestClient(create_app(BrokenEngine(), Settings())) as client:
        for path in ["/", "/health", "/languages", "/frontend/settings"]:
            answer = client.request(method, path)
            assert answer.status_code == 200, path
            assert (answer.content == b"") == (method == "HEAD"), path
        assert client.options(
            "/translate", headers={"Origin": "https://example.org", "Access-Control-Request-Method": "POST"}
        ).headers["access-control-allow-origin"] in ("*", "https://example.org")


class EchoEngine(BrokenEngine):
    """A many-to-English fake whose first source is French: it echoes each sentence it gets."""

    src_lang = "fr"
    directions = (("fr", "en"), ("de", "en"))

    def translate_lines(self, lines: Sequence[str], options: TranslateOptions, **_: object) -> list[str]:
        self.calls.append(list(lines))
        return list(lines)


def test_auto_splits_each_text_by_its_detected_languages_rules() -> None:
    # sentencex's French rules cut "z. B." (German for "e.g.") and "M." (Monsieur); German's
    # cut neither: each text must be split by its own language's rules.
    german = "Der Hund z. B. läuft schnell über die Wiese. Er ist froh."
    french = "M. Dupont est arrivé à la gare. Il est content."
    engine = EchoEngine()
    app = create_app(engine, Settings())

    async def scenario(http: httpx.AsyncClient) -> httpx.Response:
        return await http.post("/translate", json={"q": [german, french], "source": "auto", "target": "en"})

    answer = asyncio.run(in_process(app, scenario))
    assert answer.status_code == 200
    assert [g["language"] for g in answer.json()["detectedLanguage"]] == ["de", "fr"]
    german_sentences = ["Der Hund z. B. läuft schnell über die Wiese.", "Er ist froh."]
    french_sentences = ["M.", "Dupont est arrivé à la gare.", "Il est content."]
    assert engine.calls == [german_sentences + french_sentences]
    assert answer.json()["translatedText"] == [german, french]
