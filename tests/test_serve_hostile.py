"""`mt serve` for real, against what a careless or hostile client sends (issue 30): text that
cannot be encoded, JSON nested past the parser, HEAD, a comment line used as a key, a request
over its share of the queue, a client that hangs up while its lines wait. The good requests
sent beside the bad ones must get what `mt translate` writes for the same lines.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import ServeProcess, address, raw_post, sentences_of_one_length, start_server

from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K

KEY = "k-real"
COMMENTS = ["# staging key, disabled", "#k-old"]
REQUEST_LINES = 300  # --max-request-lines of the server below
PAIR = {"source": "de", "target": "en", "api_key": KEY}
AS_JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def hostile(trained_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text("\n".join([COMMENTS[0], KEY, "", COMMENTS[1]]) + "\n")
    options = ["--api-keys", str(keys), "--max-request-lines", str(REQUEST_LINES), "--max-chars", "30000"]
    # What is decoded is counted below: nothing answered from memory, one decoder kept busy by one
    # batch of a whole request.
    options += ["--cache-size", "0", "--workers", "1", "--batch-pieces", "100000"]
    running = start_server(trained_run, *options)
    yield running
    assert running.stop() == 0
    assert "Traceback" not in "".join(running.stderr), "".join(running.stderr)


@pytest.fixture(scope="module")
def reference(trained_run: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Sentences of one source length (they decode the same in any batch) and what `mt translate`
    writes for them: the answers to expect."""
    from mt_cli.decode.translator import Translator
    from mt_cli.trained import load_trained

    sentences = sentences_of_one_length(Translator.of(load_trained(trained_run), device="cpu"))
    folder = tmp_path_factory.mktemp("cli")
    (folder / "in.de").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "mt_cli", "translate", "--run", str(trained_run), "--device", "cpu"]
    subprocess.run([*command, "-i", str(folder / "in.de"), "-o", str(folder / "out.en")], check=True)
    return dict(zip(sentences, read_lines(folder / "out.en")))


# (the field the answer names, what the request sets): lone surrogates, which JSON escapes such
# as "\ud800" decode to (json.dumps writes them so)
SURROGATES = [
    ("q", {"q": "Ein Hund\ud800"}),
    ("q", {"q": ["Ein Hund.", "x\udfff"]}),
    ("source", {"source": "\ud800"}),
    ("target", {"target": "e\udc00n"}),
    ("format", {"format": "\ud800"}),
    ("api_key", {"api_key": KEY + "\ud800"}),
    ("alternatives", {"alternatives": ["\ud800"]}),
]


def test_lone_surrogates_are_a_400_naming_the_field_and_the_good_requests_beside_them_are_answered(
    hostile, reference
) -> None:
    async def scenario() -> tuple[list[httpx.Response], list[httpx.Response]]:
        async with httpx.AsyncClient(timeout=60) as http:
            url = f"{hostile.url}/translate"
            good = [http.post(url, json={"q": line, **PAIR}) for line in reference]
            bodies = [json.dumps({"q": "Ein Hund.", **PAIR, **fields}).encode() for _, fields in SURROGATES]
            bad = [http.post(url, content=body, headers=AS_JSON) for body in bodies]
            answers = await asyncio.gather(*good, *bad)
        return answers[: len(good)], answers[len(good) :]

    good, bad = asyncio.run(scenario())
    assert [response.json() for response in good] == [{"translatedText": line} for line in reference.values()]
    for (field, _), response in zip(SURROGATES, bad):
        assert response.status_code == 400, response.text
        assert response.json() == {
            "error": f"invalid request: {field} is not valid UTF-8 text (a lone surrogate)"
        }
    assert "Traceback" not in "".join(hostile.stderr)


def test_json_nested_past_the_parser_is_a_400_and_past_the_size_limit_a_413(hostile) -> None:
    with httpx.Client(timeout=60) as http:
        deep = http.post(f"{hostile.url}/translate", content=b"[" * 60_000, headers=AS_JSON)
        huge = http.post(f"{hostile.url}/translate", content=b"[" * 400_000, headers=AS_JSON)
        health = http.get(f"{hostile.url}/health")
    assert (deep.status_code, deep.json()) == (400, {"error": "invalid JSON body: nested too deeply"})
    assert huge.status_code == 413 and list(huge.json()) == ["error"]
    assert health.json()["status"] == "ok"


def test_head_answers_200_without_a_body(hostile) -> None:
    with httpx.Client(timeout=30) as http:
        for path in ["/", "/health", "/languages"]:
            answer = http.head(f"{hostile.url}{path}")
            assert (answer.status_code, answer.content) == (200, b""), path
        assert http.head(f"{hostile.url}/translate").status_code == 405


def test_a_comment_line_of_the_keys_file_is_not_a_key(hostile, reference) -> None:
    with httpx.Client(timeout=60) as http:
        for comment in [*COMMENTS, "#"]:
            refused = http.post(f"{hostile.url}/translate", json={"q": "Hund", **PAIR, "api_key": comment})
            assert (refused.status_code, refused.json()) == (403, {"error": "invalid API key"}), comment
        sentence, translation = next(iter(reference.items()))
        right = http.post(f"{hostile.url}/translate", json={"q": sentence, **PAIR})
    assert right.json() == {"translatedText": translation}


def test_a_request_over_its_share_of_the_queue_is_refused(hostile) -> None:
    with httpx.Client(timeout=60) as http:
        over = http.post(
            f"{hostile.url}/translate", json={"q": "\n".join(["Hund"] * (REQUEST_LINES + 1)), **PAIR}
        )
    assert over.status_code == 400
    lines = REQUEST_LINES + 1
    assert over.json() == {
        "error": f"invalid request: q has {lines} sentences, over this server's {REQUEST_LINES} per request"
    }


def _health(url: str) -> dict[str, Any]:
    return httpx.get(f"{url}/health", timeout=30).json()


def _wait_for(url: str, condition: Any, what: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        health = _health(url)
        if condition(health):
            return health
        time.sleep(0.01)
    pytest.fail(f"never: {what} (last /health: {health})")


def test_a_client_that_hangs_up_has_its_queued_lines_dropped_undecoded(hostile) -> None:
    sources = read_lines(SHIPPED_MULTI30K / "test_2016_flickr.de.gz")[:REQUEST_LINES]
    before = _health(hostile.url)
    with httpx.Client(timeout=120) as http, socket.create_connection(address(hostile.url)) as gone:

        def busy() -> httpx.Response:  # REQUEST_LINES lines: the engine is busy with them a while
            return http.post(f"{hostile.url}/translate", json={"q": "\n".join(sources), **PAIR})

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer = pool.submit(busy)
            _wait_for(hostile.url, lambda h: h["pendingRequests"] == 1, "the busy request is accepted")
            others = read_lines(SHIPPED_MULTI30K / "test_2016_flickr.de.gz")[
                REQUEST_LINES : REQUEST_LINES + 7
            ]
            seven = {"q": "\n".join(others), **PAIR}
            gone.sendall(raw_post("/translate", json.dumps(seven).encode()))
            _wait_for(
                hostile.url, lambda h: h["pendingRequests"] == 2 and h["queuedLines"] == 7, "the 7 lines wait"
            )
            gone.close()
            left = _wait_for(hostile.url, lambda h: h["pendingRequests"] == 1, "the hang-up is noticed")
            assert left["queuedLines"] == 0 and left["batches"] == before["batches"], (
                "the busy request was decoded before the client hung up: the test proved nothing"
            )
            assert answer.result().status_code == 200
    after = _wait_for(
        hostile.url, lambda h: h["droppedRequests"] > before["droppedRequests"], "the drop is counted"
    )
    assert after["droppedRequests"] - before["droppedRequests"] == 1
    assert after["lines"] - before["lines"] == REQUEST_LINES  # the busy request's, not one more
    assert "Traceback" not in "".join(hostile.stderr) and "ClientDisconnect" not in "".join(hostile.stderr)
