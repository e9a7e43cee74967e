"""A property-based fuzz of the HTTP API: Hypothesis makes requests (arbitrary JSON values, text
with lone surrogates, field names and types, ``alternatives`` good and bad, form and multipart
bodies, bytes, content types, query strings, methods and paths) to /translate, /suggest and
/translate_file, and the app, in-process over a fast fake engine and storing suggestions in a
database, must answer each within a few seconds, never 500, every answer of 400 or more as JSON
``{"error": str}``, a translation with LibreTranslate's shapes, each suggestion it accepted stored
and each file it translated downloadable once; ``format`` text and html both, with HTML as broken
as clients send it, and files of every format, good, corrupt and of other types.

``scripts/serve-fuzz.py`` runs the same property for many more cases (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import collections
import json
import sqlite3
import threading
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import epub_file, odf_file, slides_file, word_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mt_cli.config.options import TranslateOptions
from mt_cli.decode.results import Hypothesis, Translation
from mt_cli.serve.app import Settings, create_app
from mt_cli.serve.detect import Detector

ANSWER_TIMEOUT_S = 10  # far above any answer of the fake engine: longer is a hang


class FastEngine:
    """de -> en that upper-cases, its n-best list the line upper-cased, lower-cased, title-cased
    and so on; fails (a 500) if a line could not be encoded, as SentencePiece does."""

    src_lang, tgt_lang, beam_size, origin, parallel_batches = "de", "en", 1, "a fake", 1

    def count_pieces(self, lines: list[str]) -> list[int]:
        return [len(line.split()) + 1 for line in lines]

    directions = (("de", "en"),)

    def resolve(self, options: TranslateOptions) -> TranslateOptions:
        return options

    def translate_lines(self, lines: Sequence[str], options: TranslateOptions, **_: object) -> list[str]:
        for line in lines:
            line.encode("utf-8")
        return [line.upper() for line in lines]

    def translate(self, lines: Sequence[str], options: TranslateOptions, **_: object) -> list[Translation]:
        cases = [str.upper, str.lower, str.title, str.swapcase, str.capitalize]
        found = []
        for line in lines:
            line.encode("utf-8")
            texts = [cases[k % len(cases)](line) + "!" * (k // len(cases)) for k in range(options.n_best)]
            hyps = tuple(Hypothesis(text, (), -float(k)) for k, text in enumerate(texts))
            found.append(Translation(line, hyps if line else hyps[:1]))  # an empty line: one hypothesis
        return found


@dataclass
class InProcess:
    """The app on its own event loop in a thread (startup and shutdown run), spoken to by httpx."""

    app: Any
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    alternatives: int = 0  # translations answered with alternatives
    suggested: int = 0  # suggestions answered {"success": true}
    files: int = 0  # files translated and then downloaded

    def __post_init__(self) -> None:
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self._stop = asyncio.Event()
        self._call(self._start())

    async def _start(self) -> None:
        ready = asyncio.Event()

        async def lifespan() -> None:
            async with self.app.router.lifespan_context(self.app):
                ready.set()
                await self._stop.wait()

        self._lifespan = asyncio.ensure_future(lifespan())
        await ready.wait()
        transport = httpx.ASGITransport(app=self.app)
        self.http = httpx.AsyncClient(transport=transport, base_url="http://fuzz")

    def _call(self, coroutine: Any, timeout: float = ANSWER_TIMEOUT_S) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def request(self, method: str, path: str, **arguments: Any) -> httpx.Response:
        """The answer, or a test failure if none comes within ANSWER_TIMEOUT_S."""
        try:
            response = self._call(self.http.request(method, path, **arguments))
        except FutureTimeout:
            pytest.fail(f"no answer within {ANSWER_TIMEOUT_S} s to {method} {path} {arguments!r:.300}")
        self.statuses[response.status_code] += 1
        if response.status_code == 200 and method == "POST" and response.request.url.path == "/translate":
            self.alternatives += int("alternatives" in response.json())
        if response.status_code == 200 and method == "POST" and response.request.url.path == "/suggest":
            self.suggested += 1
        return response

    def close(self) -> None:
        async def stop() -> None:
            await self.http.aclose()
            self._stop.set()
            await self._lifespan

        self._call(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)


LIMIT = 3  # --alternatives-limit of the app under fuzz


def server(suggestions: Path) -> InProcess:
    """The app under fuzz, storing suggestions in ``suggestions``: small limits, so that sizes are
    refused often too. lingua's models are loaded first (once a process), so that no answer waits
    for them past ANSWER_TIMEOUT_S."""
    Detector(["de", "en"]).rank("Ein Hund läuft.")  # German letters: lingua loads models per letter
    settings = Settings(max_chars=300, max_queue=64, alternatives_limit=LIMIT, suggestions=suggestions)
    return InProcess(create_app(FastEngine(), settings))


# Text as clients may send it: any code point, lone surrogates (from JSON escapes) included.
any_text = st.text(st.characters(exclude_categories=["Cn"]), max_size=40)
surrogates = st.characters(categories=["Cs"])
texts = st.one_of(
    any_text,
    st.builds(lambda before, bad, after: before + bad + after, any_text, surrogates, any_text),
    st.sampled_from(["", "de", "en", "auto", "text", "html", "Ein Hund.", "a\nb\r\n", "\n", "x\udfff"]),
)
# HTML as clients may send it, broken markup and entities included.
html_texts = st.lists(
    st.sampled_from(
        [
            "<p>",
            "</p>",
            "<b>",
            "</b>",
            "<br/>",
            "<!--",
            "-->",
            "<![",
            "</>",
            "&amp;",
            "&#x1F642",
            "&nbsp",
            "<script>",
            "</script>",
            '<span translate="no">',
            "</span>",
            "<code>",
            "Ein Hund. ",
            "Zwei.",
            " ",
        ]
    ),  # fmt: skip
    min_size=1,
    max_size=12,
).map("".join)
sentences = (texts | html_texts).filter(bool)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | texts,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=12,
)
field_names = (
    st.sampled_from(["q", "source", "target", "format", "api_key", "alternatives", "s", "translatedText"])
    | texts
)
content_types = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=fuzz",
        "multipart/form-data",
        "text/plain",
        "application/ld+json",
        "",
    ]
) | st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30)
CONTENT_TYPES = {
    "file": "multipart/form-data; boundary=fuzz",
    "json": "application/json",
    "form": "application/x-www-form-urlencoded",
    "multipart": "multipart/form-data; boundary=fuzz",
}
MUTATIONS = ["field", "field", "drop", "route", "content-type", "body", "body", "query"]


def _quote(value: Any) -> str:
    """A form value's percent-encoding; a lone surrogate becomes bytes that are not UTF-8."""
    text = value if isinstance(value, str) else json.dumps(value)
    return urllib.parse.quote(text.encode("utf-8", "surrogatepass"))


def _form(pairs: list[tuple[str, Any]]) -> bytes:
    return "&".join(f"{_quote(name)}={_quote(value)}" for name, value in pairs).encode()


def _multipart(pairs: list[tuple[str, Any]], files: bool) -> bytes:
    parts = []
    for name, value in pairs:
        text = value if isinstance(value, str) else json.dumps(value)
        filename = '; filename="f.txt"' if files else ""
        disposition = f'Content-Disposition: form-data; name="{name}"{filename}'
        parts.append(f"--fuzz\r\n{disposition}\r\n\r\n{text}\r\n".encode("utf-8", "surrogatepass"))
    return b"".join(parts) + b"--fuzz--\r\n"


def _translation(draw: st.DrawFn) -> dict[str, Any]:
    """The fields of a good /translate request."""
    data: dict[str, Any] = {
        "q": draw(st.one_of(sentences, sentences, st.lists(sentences, min_size=1, max_size=4))),
        "source": draw(st.sampled_from(["de", "auto"])),
        "target": "en",
    }
    if draw(st.booleans()):
        data["format"] = draw(st.sampled_from(["text", "html"]))
    if draw(st.integers(0, 3)):  # mostly good counts (as a number or text, as a form sends it)
        count = draw(st.integers(1, LIMIT))
        good = st.sampled_from([count, count, count, str(count), f" {count} ", f"0{count}", 0, ""])
        bad = st.sampled_from([-1, "-2", LIMIT + 1, 2**70, "9" * 30, "x", "2.5", "٣", "1_0", True, 2.0, [1]])
        data["alternatives"] = draw(good) if draw(st.integers(0, 3)) else draw(bad)
    return data


def _suggestion(draw: st.DrawFn) -> dict[str, Any]:
    """The fields of a /suggest request, mostly good: a line for a line, often a translation."""
    q = draw(sentences)
    lines = q.count("\n") + 1
    s = "\n".join(draw(st.lists(sentences, min_size=lines, max_size=lines)))
    data: dict[str, Any] = {"q": q, "s": s if draw(st.integers(0, 5)) else draw(texts), "target": "en"}
    data["source"] = draw(st.sampled_from(["de", "de", "de", "auto", "fr"]))
    if draw(st.booleans()):
        data["translatedText"] = draw(texts)
    if draw(st.booleans()):
        data["api_key"] = draw(texts)
    return data


DOCX = word_file()
PACKAGES = [
    ("brief.docx", DOCX), ("folien.pptx", slides_file()), ("text.odt", odf_file("text")),
    ("folien.odp", odf_file("presentation")), ("buch.epub", epub_file()),
]  # fmt: skip
SRT = (
    "1\r\n00:00:01,000 --> 00:00:02,500\r\nEin Hund.\r\n- Zwei!\r\n\r\n"
    "2\n00:00:03,000 --> 00:00:04,000\nJa.\n"
)


def _upload(draw: st.DrawFn) -> tuple[str, bytes]:
    """A file as clients send it: mostly a good one of a supported format, else a corrupt one,
    another type, an odd name, or any bytes."""
    text = draw(sentences).encode("utf-8", "surrogatepass")
    good = st.sampled_from([("a.txt", text), ("Seite.html", text), ("talk.srt", SRT.encode()), *PACKAGES])
    bad = st.tuples(
        st.sampled_from(["a.docx", "a.srt", "a.pdf", "", "../../x.txt", "noextension", "a.TXT", "ä ö.html"]),
        st.binary(max_size=200) | st.just(DOCX[:300]) | st.just(text),
    )
    damaged = st.builds(_flipped, st.sampled_from(PACKAGES), st.integers(0, 1 << 20), st.integers(0, 255))
    return draw(good) if draw(st.integers(0, 2)) else draw(bad | damaged)


def _flipped(package: tuple[str, bytes], at: int, value: int) -> tuple[str, bytes]:
    """A package with one byte set to ``value``: a damaged member, header or central directory."""
    name, data = package
    return name, data[: at % len(data)] + bytes([value]) + data[at % len(data) + 1 :]


def _file_multipart(pairs: list[tuple[str, Any]], upload: tuple[str, bytes]) -> bytes:
    name, data = upload
    head = f'--fuzz\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n\r\n'
    return _multipart(pairs, files=False)[: -len(b"--fuzz--\r\n")] + (
        head.encode("utf-8", "surrogatepass") + data + b"\r\n--fuzz--\r\n"
    )


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    """(method, path, httpx arguments) of one request: a good /translate or /suggest request
    (JSON, form or multipart) with up to four mutations (a field set to any value, a field
    dropped, another route or method, another content type, another body, a query string), so
    that cases reach every check and, unmutated, the engine or the database."""
    path = draw(st.sampled_from(["/translate", "/translate", "/suggest", "/translate_file"]))
    if path == "/translate_file":
        data: dict[str, Any] = {"source": draw(st.sampled_from(["de", "auto"])), "target": "en"}
        kind = "file"
    else:
        data = _translation(draw) if path == "/translate" else _suggestion(draw)
        kind = draw(st.sampled_from(["json", "json", "form", "multipart"]))
    method = "POST"
    content_type: str | None = CONTENT_TYPES[kind]
    body: bytes | None = None
    query: dict[str, Any] = {}
    for mutation in draw(st.lists(st.sampled_from(MUTATIONS), max_size=4)):
        if mutation == "field":
            data[draw(field_names)] = draw(st.one_of(texts, json_values))
        elif mutation == "drop" and data:
            del data[draw(st.sampled_from(sorted(data)))]
        elif mutation == "route":
            method = draw(st.sampled_from(["POST", "GET", "HEAD", "PUT", "OPTIONS", "DELETE"]))
            path = draw(
                st.sampled_from(
                    [
                        "/",
                        "/detect",
                        "/health",
                        "/languages",
                        "/frontend/settings",
                        "/translate",
                        "/suggest",
                        "/translate_file",
                        "/download_file/0.a_en.txt",
                    ]
                )
                | st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=20).map(
                    lambda p: "/" + p.replace("?", "")
                )
            )
        elif mutation == "content-type":
            content_type = draw(st.none() | content_types)
        elif mutation == "body":
            body = draw(
                st.binary(max_size=200)
                | st.builds(lambda value: json.dumps(value).encode(), json_values)
                | st.builds(  # deeper than Python's parser recurses (past about 1,000)
                    lambda opening, depth: opening * depth,
                    st.sampled_from([b"[", b'{"q":', b'{"q": ["x", ']),
                    st.sampled_from([1_500, 3_000]) | st.integers(1, 3_000),
                )
            )
        elif mutation == "query":
            query[draw(field_names)] = draw(texts)
    if body is None:
        pairs = [(str(name), value) for name, value in data.items()]
        if kind == "json":
            body = json.dumps(data).encode()
        elif kind == "file":
            body = _file_multipart(pairs, _upload(draw))
        else:
            body = _form(pairs) if kind == "form" else _multipart(pairs, files=draw(st.booleans()))
    if query:
        path += "?" + _form(list(query.items())).decode()
    headers = {} if content_type is None else {"Content-Type": content_type}
    return method, path, {"content": body, "headers": headers}


def check_file(running: InProcess, response: httpx.Response) -> None:
    """A translated file: its URL downloads it once, as an attachment; then it is gone (404)."""
    url = response.json()["translatedFileUrl"]
    assert isinstance(url, str) and url.startswith("http://fuzz/download_file/")
    path = urllib.parse.urlsplit(url).path
    first, second = running.request("GET", path), running.request("GET", path)
    assert first.status_code == 200 and first.headers["content-disposition"].startswith("attachment; ")
    assert second.status_code == 404 and list(second.json()) == ["error"]
    running.files += 1


def check_answer(response: httpx.Response, method: str) -> None:
    """The property: no 500, every error answered as JSON {"error": a string}, and a translation
    with LibreTranslate's shapes: ``alternatives`` a list of texts per text, none the best."""
    assert response.status_code != 500, response.text
    if response.status_code >= 400 and method != "HEAD":
        body = response.json()
        assert list(body) == ["error"] and isinstance(body["error"], str) and body["error"]
    if response.status_code == 200 and method == "POST" and response.request.url.path == "/suggest":
        assert response.json() == {"success": True}
    if response.status_code == 200 and method == "POST" and response.request.url.path == "/translate":
        body = response.json()
        translated = body["translatedText"]
        if "alternatives" in body:
            batch = isinstance(translated, list)
            texts, alternatives = (
                (translated, body["alternatives"]) if batch else ([translated], [body["alternatives"]])
            )
            assert len(alternatives) == len(texts)
            for best, others in zip(texts, alternatives):
                assert len(others) <= LIMIT and len(set(others)) == len(others) and best not in others
                assert all(isinstance(other, str) and other for other in others)


def test_no_request_gets_a_500_a_hang_or_an_answer_that_is_not_json(tmp_path: Path) -> None:
    database = tmp_path / "suggestions.db"
    running = server(database)

    @settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
    @given(request=requests())
    def answers_well(request: tuple[str, str, dict[str, Any]]) -> None:
        method, path, arguments = request
        response = running.request(method, path, **arguments)
        check_answer(response, method)
        if (
            response.status_code == 200
            and method == "POST"
            and response.request.url.path == "/translate_file"
        ):
            check_file(running, response)

    try:
        answers_well()
    finally:
        running.close()
    # A fuzz that never got past the parser, or never refused, would prove little.
    assert running.statuses[200] >= 10 and running.statuses[400] >= 10, running.statuses
    # Answers with alternatives vary from run to run (2 to 24 of 250 examples in 50 runs: most
    # requests are mutated into refusals, and the tiny model's alternatives are often its best
    # again, which LibreTranslate's rule leaves out); test_serve_alternatives checks their values.
    assert running.alternatives >= 1, "the fuzz never got alternatives back"
    assert running.suggested >= 1, "the fuzz never got a suggestion stored"
    assert running.files >= 1, "the fuzz never got a file translated"
    # Every suggestion answered {"success": true} is in the database, and no other.
    stored = sqlite3.connect(database).execute("SELECT count(*) FROM suggestions").fetchone()[0]
    assert stored == running.suggested
