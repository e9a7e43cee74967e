"""`mt serve` for real: a server process on a free port over a run trained by `mt train`, spoken
to over HTTP by the official LibreTranslate client (libretranslatepy) and by httpx.

Every answer must be the engine's own ``translate_lines`` output for the same lines. The engine's
results depend a little on what else is in its batch (padding changes the sums; in bf16, which
a CPU with native bf16 decodes in, that flips a few percent of this barely trained model's
lines), so requests sent one at a time are compared with their lines decoded alone, and
concurrent requests use sentences of one source length, which batch without padding and
decode the same in any company.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import re
import signal
import socket
import time
import urllib.error
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from helpers import ServeProcess, sentences_of_one_length, start_server
from libretranslatepy import LibreTranslateAPI

from mt_cli.serve.detect import Detector, detect
from mt_cli.serve.scope import Scope

MAX_CHARS = 400
KEYS = ["k-one", "k-two"]
DE_EN = Scope("de", "en", MAX_CHARS, 100)
SENTENCES = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest ein Buch."]


@pytest.fixture(scope="module")
def translator(trained_run: Path):
    from mt_cli.decode.translator import Translator
    from mt_cli.trained import load_trained

    return Translator.of(load_trained(trained_run), device="cpu")


@pytest.fixture(scope="module")
def same_length(translator) -> list[str]:
    return sentences_of_one_length(translator)


@pytest.fixture(scope="module")
def server(trained_run: Path) -> Iterator[ServeProcess]:
    running = start_server(trained_run, "--max-chars", str(MAX_CHARS))
    yield running
    assert running.stop() == 0
    assert "Traceback" not in "".join(running.stderr)


@pytest.fixture(scope="module")
def keyed_server(trained_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """Keys required, and a queue of two lines: most of a burst of requests gets 429."""
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text("\n".join(KEYS) + "\n\n")
    running = start_server(trained_run, "--api-keys", str(keys), "--max-queue", "2")
    yield running
    assert running.stop() == 0


def test_the_libretranslate_client_translates_lists_languages_and_detects(server, translator) -> None:
    client = LibreTranslateAPI(server.url)
    for sentence in SENTENCES:
        assert client.translate(sentence, "de", "en") == translator.translate_lines([sentence])[0]
    assert client.translate(SENTENCES[0], "auto", "en") == translator.translate_lines([SENTENCES[0]])[0]
    assert client.languages() == [
        {"code": "de", "name": "German", "targets": ["en"]},
        {"code": "en", "name": "English", "targets": []},
    ]
    detected = client.detect("Ein Hund rennt.")
    assert detected[0]["language"] == "de"
    assert detected == [guess.answer() for guess in detect(Detector(["de", "en"]), "Ein Hund rennt.", DE_EN)]


def test_json_form_multipart_and_list_bodies_give_the_engines_translations(server, translator) -> None:
    url, one, scope = f"{server.url}/translate", SENTENCES[1], {"source": "de", "target": "en"}
    alone = translator.translate_lines([one])[0]
    lines = translator.translate_lines(SENTENCES)
    multipart = {name: (None, value) for name, value in {"q": one, **scope}.items()}
    with httpx.Client(timeout=60) as http:
        assert http.post(url, json={"q": one, **scope, "format": "text"}).json() == {"translatedText": alone}
        assert http.post(url, json={"q": SENTENCES, **scope}).json() == {"translatedText": lines}
        assert http.post(url, data={"q": one, **scope}).json() == {"translatedText": alone}
        assert http.post(url, data={"q": SENTENCES, **scope}).json() == {"translatedText": lines}
        assert http.post(url, files=multipart).json() == {"translatedText": alone}
        assert http.post(url, params={"q": one, **scope}).json() == {"translatedText": alone}
        # A text's lines are translated one by one and keep their breaks (CR LF, a final newline).
        text = http.post(url, json={"q": "\r\n".join(SENTENCES) + "\n", **scope}).json()
        assert text == {"translatedText": "\r\n".join(lines) + "\n"}
        auto = http.post(url, json={"q": [one, one], "source": "auto", "target": "en"}).json()
        detected = Detector(["de", "en"]).rank(one)[0].answer()
        assert detected["language"] == "de"
        assert auto == {"translatedText": [alone, alone], "detectedLanguage": [detected, detected]}
        form_auto = http.post(url, data={"q": one, "source": "auto", "target": "en"}).json()
        assert form_auto == {"translatedText": alone, "detectedLanguage": detected}
        assert http.post(url, json={"q": ["", one], **scope}).json() == {"translatedText": ["", alone]}


def test_paragraphs_and_html_are_translated_sentence_by_sentence(server, trained_run, translator) -> None:
    import mt_cli

    model = mt_cli.load(trained_run, device="cpu")
    url, scope = f"{server.url}/translate", {"source": "de", "target": "en"}
    paragraph = f"{SENTENCES[0]}  {SENTENCES[1]}\n\n {SENTENCES[2]}"
    page = (
        f'<p class="x">{SENTENCES[0].replace("Mann", "<b>Mann</b>")} <i>{SENTENCES[1]}</i></p>'
        f"<pre>{SENTENCES[2]}</pre><!-- {SENTENCES[2]} -->"
    )
    with httpx.Client(timeout=60) as http:
        text = http.post(url, json={"q": paragraph, **scope}).json()
        html = http.post(url, json={"q": [page, SENTENCES[2]], **scope, "format": "html"}).json()
    lines = translator.translate_lines(SENTENCES)  # the paragraph's sentences, in one batch as the server's
    assert text == {"translatedText": f"{lines[0]}  {lines[1]}\n\n {lines[2]}"}
    assert text["translatedText"] == model.translate_document(paragraph)
    assert html == {"translatedText": model.translate_documents([page, SENTENCES[2]], "html")}
    assert html["translatedText"][0].endswith(f"</i></p><pre>{SENTENCES[2]}</pre><!-- {SENTENCES[2]} -->")


def test_the_page_settings_and_health_endpoints(server) -> None:
    with httpx.Client(timeout=30) as http:
        settings = http.get(f"{server.url}/frontend/settings").json()
        health = http.get(f"{server.url}/health").json()
        page = http.get(f"{server.url}/")
    assert settings["charLimit"] == MAX_CHARS and settings["keyRequired"] is False
    assert settings["language"] == {
        "source": {"code": "de", "name": "German"},
        "target": {"code": "en", "name": "English"},
    }
    assert health["status"] == "ok" and (health["source"], health["target"]) == ("de", "en")
    assert page.headers["content-type"].startswith("text/html") and 'id="source-text"' in page.text
    assert not re.search(r"https?:|<script src|<link", page.text)  # nothing from elsewhere


async def _oversized_stream() -> AsyncIterator[bytes]:
    for _ in range(40):
        yield b"x" * 1024


def _bad_requests() -> list[tuple[str, int, str, dict]]:
    """(what is wrong, the status it must get, the path, httpx's arguments)."""
    scope = {"source": "de", "target": "en"}
    as_json = {"Content-Type": "application/json"}
    return [
        ("broken JSON", 400, "/translate", {"content": b'{"q": "x",', "headers": as_json}),
        ("not UTF-8", 400, "/translate", {"content": b'{"q": "\xff"}', "headers": as_json}),
        ("a JSON list", 400, "/translate", {"json": ["Hund", "de", "en"]}),
        ("no q", 400, "/translate", {"json": scope}),
        ("no source", 400, "/translate", {"json": {"q": "Hund", "target": "en"}}),
        ("no target", 400, "/translate", {"data": {"q": "Hund", "source": "de"}}),
        ("empty q", 400, "/translate", {"json": {"q": "", **scope}}),
        ("empty list", 400, "/translate", {"json": {"q": [], **scope}}),
        ("q a number", 400, "/translate", {"json": {"q": 5, **scope}}),
        ("q a list of numbers", 400, "/translate", {"json": {"q": [1, 2], **scope}}),
        ("unknown source", 400, "/translate", {"json": {"q": "Hund", "source": "fr", "target": "en"}}),
        ("unknown target", 400, "/translate", {"data": {"q": "Hund", "source": "de", "target": "de"}}),
        ("a made-up format", 400, "/translate", {"json": {"q": "Hund", **scope, "format": "md"}}),
        ("q over --max-chars", 400, "/translate", {"json": {"q": "a" * (MAX_CHARS + 1), **scope}}),
        ("a list over it", 400, "/translate", {"json": {"q": ["a" * 300, "b" * 101], **scope}}),
        ("plain text", 400, "/translate", {"content": b"Hund", "headers": {"Content-Type": "text/plain"}}),
        ("detect without q", 400, "/detect", {"data": {"api_key": "x"}}),
        ("a declared big body", 413, "/translate", {"content": b" " * 40_000, "headers": as_json}),
        ("a streamed big body", 413, "/translate", {"content": _oversized_stream(), "headers": as_json}),
        ("an unknown path", 404, "/translate_document", {"json": {}}),
    ]


def test_bad_requests_get_their_status_and_an_error_while_good_ones_are_served(
    server, translator, same_length
) -> None:
    expected = translator.translate_lines(same_length)
    bad = _bad_requests()

    async def scenario() -> tuple[list[httpx.Response], list[httpx.Response]]:
        async with httpx.AsyncClient(timeout=60) as http:
            good = [
                http.post(f"{server.url}/translate", json={"q": line, "source": "de", "target": "en"})
                for line in same_length
            ]
            refused = [http.post(f"{server.url}{path}", **arguments) for _, _, path, arguments in bad]
            answers = await asyncio.gather(*good, *refused)
        return answers[: len(good)], answers[len(good) :]

    good, refused = asyncio.run(scenario())
    assert [response.json() for response in good] == [{"translatedText": line} for line in expected]
    for (what, status, _, _), response in zip(bad, refused):
        assert (what, response.status_code) == (what, status)
        body = response.json()
        assert list(body) == ["error"] and isinstance(body["error"], str) and body["error"], what
    with httpx.Client(timeout=30) as http:
        assert http.get(f"{server.url}/translate").json() == {"error": "Method Not Allowed"}


def test_keys_are_required_on_translate_and_detect_only(keyed_server, translator) -> None:
    url, one = keyed_server.url, SENTENCES[0]
    request = {"q": one, "source": "de", "target": "en"}
    with httpx.Client(timeout=60) as http:
        assert http.post(f"{url}/translate", json=request).status_code == 403
        wrong = http.post(f"{url}/translate", data={**request, "api_key": "nope"})
        assert wrong.status_code == 403 and list(wrong.json()) == ["error"]
        assert http.post(f"{url}/detect", json={"q": one}).status_code == 403
        right = http.post(f"{url}/translate", json={**request, "api_key": KEYS[1]})
        assert right.json() == {"translatedText": translator.translate_lines([one])[0]}
        assert http.get(f"{url}/frontend/settings").json()["keyRequired"] is True
        assert http.get(f"{url}/languages").status_code == 200
    assert (
        LibreTranslateAPI(url, api_key=KEYS[0]).translate(one, "de", "en") == right.json()["translatedText"]
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        LibreTranslateAPI(url).translate(one, "de", "en")
    assert refused.value.code == 403 and "error" in json.loads(refused.value.read())


def test_a_burst_over_the_queue_gets_429_and_the_rest_is_served(
    keyed_server, translator, same_length
) -> None:
    expected = dict(zip(same_length, translator.translate_lines(same_length)))
    burst = (same_length * 3)[:40]

    async def scenario() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64)) as http:
            request = {"source": "de", "target": "en", "api_key": KEYS[0]}
            posts = [
                http.post(f"{keyed_server.url}/translate", json={"q": line, **request}) for line in burst
            ]
            return await asyncio.gather(*posts)

    answers = asyncio.run(scenario())
    statuses = collections.Counter(response.status_code for response in answers)
    assert set(statuses) == {200, 429} and statuses[200] >= 1, statuses
    for line, response in zip(burst, answers):
        if response.status_code == 200:
            assert response.json() == {"translatedText": expected[line]}
        else:
            assert "error" in response.json() and response.headers["retry-after"] == "1"
    with httpx.Client(timeout=60) as http:  # a request with more lines than the queue could ever hold
        three = http.post(
            f"{keyed_server.url}/translate",
            json={"q": "a\nb\nc", "source": "de", "target": "en", "api_key": KEYS[0]},
        )
        assert three.status_code == 400 and "3 sentences" in three.json()["error"]


def test_sigterm_answers_every_accepted_request_then_exits_0(trained_run, translator, same_length) -> None:
    expected = dict(zip(same_length, translator.translate_lines(same_length)))
    requests = [[same_length[(i + j) % len(same_length)] for j in range(8)] for i in range(24)]
    running = start_server(trained_run)
    try:

        async def scenario() -> tuple[list[httpx.Response], int]:
            async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=64)) as http:
                body = {"source": "de", "target": "en"}
                posts = [
                    asyncio.ensure_future(http.post(f"{running.url}/translate", json={"q": q, **body}))
                    for q in requests
                ]
                pending = await _wait_until_accepted(running.url, len(requests))
                running.process.send_signal(signal.SIGTERM)
                return await asyncio.gather(*posts), pending

        answers, pending_at_sigterm = asyncio.run(scenario())
        assert pending_at_sigterm > 0, "every request was answered before SIGTERM: the test proved nothing"
        assert [response.status_code for response in answers] == [200] * len(requests)
        assert [response.json()["translatedText"] for response in answers] == [
            [expected[line] for line in q] for q in requests
        ]
        assert running.process.wait(60) == 0
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{running.url}/health")
    finally:
        running.kill()  # a no-op once it has exited; else a failed test leaves no server behind
    assert "Traceback" not in "".join(running.stderr)


async def _wait_until_accepted(url: str, count: int, timeout: float = 60) -> int:
    """Poll /health until ``count`` requests have reached the batcher; the number still unanswered."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=30) as http:
        while time.monotonic() < deadline:
            health = (await http.get(f"{url}/health")).json()
            if health["requests"] + health["pendingRequests"] >= count:
                return health["pendingRequests"]
            await asyncio.sleep(0.005)
    pytest.fail("the requests never reached the server")


def test_a_port_in_use_and_a_missing_keys_file_are_one_line_errors(trained_run, tmp_path) -> None:
    from typer.testing import CliRunner

    from mt_cli.cli import app

    runner = CliRunner()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = ["serve", "--run", str(trained_run), "--port", str(port)]
        in_use = runner.invoke(app, command)  # the port is tried before the model loads
    missing = runner.invoke(app, [*command, "--api-keys", str(tmp_path / "none.txt")])
    assert (in_use.exit_code, in_use.stderr) == (
        3,
        f"error: port {port} on 127.0.0.1 is in use; stop what listens there or pick another --port\n",
    )
    assert (missing.exit_code, missing.stderr) == (
        2,
        f"error: --api-keys {tmp_path / 'none.txt'} does not exist\n",
    )


def test_a_worker_killed_under_load_is_replaced_and_every_request_answered(trained_run) -> None:
    running = start_server(trained_run, "--workers", "2", "--cache-size", "0")
    try:
        pids = httpx.get(f"{running.url}/health").json()["workerPids"]
        assert len(pids) == 2
        sources = SENTENCES * 4

        async def client(http: httpx.AsyncClient, until: float) -> list[int]:
            statuses = []
            while time.monotonic() < until:
                for source in sources:
                    answer = await http.post(
                        f"{running.url}/translate", json={"q": source, "source": "de", "target": "en"}
                    )
                    statuses.append(answer.status_code)
            return statuses

        async def scenario() -> list[int]:
            async with httpx.AsyncClient(timeout=60) as http:
                until = time.monotonic() + 3
                load = asyncio.gather(*(client(http, until) for _ in range(8)))
                await asyncio.sleep(1)
                os.kill(pids[0], signal.SIGKILL)
                return [status for statuses in await load for status in statuses]

        statuses = asyncio.run(scenario())
        health = httpx.get(f"{running.url}/health").json()
    finally:
        running.stop()
    assert statuses and set(statuses) == {200}
    assert (
        health["workerRestarts"] == 1
        and pids[0] not in health["workerPids"]
        and pids[1] in health["workerPids"]
    )


def test_a_sentence_cut_to_the_models_positions_is_logged_without_its_words_and_counted(server) -> None:
    before = httpx.get(f"{server.url}/health").json()["warnedLines"]
    long = " ".join(["Hund"] * 75)  # more pieces than the tiny model's 64 positions, within --max-chars
    answer = httpx.post(f"{server.url}/translate", json={"q": long, "source": "de", "target": "en"})
    assert answer.status_code == 200 and answer.json()["translatedText"]
    assert httpx.get(f"{server.url}/health").json()["warnedLines"] == before + 1
    [logged] = [line for line in server.stderr if "a sentence of" in line]
    said = rf"mt serve: a sentence of {len(long)} characters: \d+ source pieces exceed the model's limit"
    assert re.fullmatch(said + " of 63; the rest is dropped\n", logged), logged
