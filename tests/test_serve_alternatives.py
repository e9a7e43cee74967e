"""LibreTranslate's ``alternatives`` on /translate: in-process over a fake n-best engine (the
answer's shapes, multi-line texts, the decode settings, batching by setting, every refusal), then
for real: a `mt serve` process whose alternatives must be `mt translate --n-best` rows 2 to 4.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from helpers import (
    ServeProcess,
    check_alternatives,
    in_process,
    n_best_rows,
    sentences_of_one_length,
    start_server,
)

from mt_cli.config.options import TranslateOptions
from mt_cli.decode.results import Hypothesis, Translation
from mt_cli.serve import alternatives
from mt_cli.serve.app import Settings, create_app
from mt_cli.serve.detect import Detector

PAIR = {"source": "de", "target": "en"}
LIMIT_ERROR = "invalid request: alternatives parameter must be <= 3 (--alternatives-limit)"


class NBestEngine:
    """de -> en that upper-cases; its k-th hypothesis adds " k", except for a line starting with
    "same", whose hypotheses are all alike. Records each call: (kind, lines, beam, n-best)."""

    src_lang, tgt_lang, beam_size, origin, parallel_batches = "de", "en", 2, "a fake", 1

    def count_pieces(self, lines: list[str]) -> list[int]:
        return [len(line.split()) + 1 for line in lines]

    directions = (("de", "en"),)

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], int | None, int]] = []

    def resolve(self, options: TranslateOptions) -> TranslateOptions:
        return options

    def translate_lines(self, lines: Sequence[str], options: TranslateOptions, **_: object) -> list[str]:
        self.calls.append(("lines", list(lines), options.beam, 1))
        return [line.upper() for line in lines]

    def translate(self, lines: Sequence[str], options: TranslateOptions, **_: object) -> list[Translation]:
        self.calls.append(("n-best", list(lines), options.beam, options.n_best))
        found = []
        for line in lines:
            alike = line.startswith("same")
            texts = [
                line.upper() if k == 0 or alike else f"{line.upper()} {k}" for k in range(options.n_best)
            ]
            hyps = tuple(Hypothesis(text, (), -float(k)) for k, text in enumerate(texts))
            found.append(Translation(line, hyps if line else hyps[:1]))  # an empty line: one hypothesis
        return found


def test_alternatives_are_answered_as_libretranslate_answers_them() -> None:
    engine = NBestEngine()
    with TestClient(create_app(engine, Settings())) as client:
        one = client.post("/translate", json={"q": "hund", **PAIR, "alternatives": 3}).json()
        listed = client.post("/translate", data={"q": ["a", "same", ""], **PAIR, "alternatives": "2"}).json()
        text = client.post(
            "/translate",
            json={"q": "ein hund\n\nund eine katze\r\n", "source": "auto", "target": "en", "alternatives": 2},
        )
        plain = [
            client.post("/translate", json={"q": "hund", **PAIR, "alternatives": n}).json() for n in (0, "")
        ]
        settings = client.get("/frontend/settings").json()
    assert one == {"translatedText": "HUND", "alternatives": ["HUND 1", "HUND 2", "HUND 3"]}
    # A list q: a list per text; alike hypotheses and an empty text's are left out, as LibreTranslate does.
    assert listed == {"translatedText": ["A", "SAME", ""], "alternatives": [["A 1", "A 2"], [], []]}
    # A text's k-th alternative puts its sentences' k-th hypotheses back in their places; an empty
    # line stays empty, a CR LF stays one.
    assert text.json() == {
        "translatedText": "EIN HUND\n\nUND EINE KATZE\r\n",
        "detectedLanguage": Detector(["de", "en"]).rank("ein hund\n\nund eine katze\r\n")[0].answer(),
        "alternatives": ["EIN HUND 1\n\nUND EINE KATZE 1\r\n", "EIN HUND 2\n\nUND EINE KATZE 2\r\n"],
    }
    assert text.json()["detectedLanguage"]["language"] == "de"
    assert plain == [{"translatedText": "HUND"}] * 2  # no alternatives asked: no key, as before
    # N alternatives: n-best N + 1 in a beam of max(the card's 2, N + 1); none: translate_lines.
    assert engine.calls == [
        ("n-best", ["hund"], 4, 4),
        ("n-best", ["a", "same"], 3, 3),  # an empty text has no sentence to decode
        ("n-best", ["ein hund", "und eine katze"], 3, 3),
        ("lines", ["hund"], None, 1),  # alternatives "" asks the same again: the cache answers it
    ]
    assert settings["alternativesLimit"] == 3


def test_the_servers_beam_is_kept_where_it_is_wider_than_the_alternatives_need() -> None:
    engine = NBestEngine()
    with TestClient(create_app(engine, Settings(options=TranslateOptions(beam=6, scores=False)))) as client:
        answer = client.post("/translate", json={"q": "hund", **PAIR, "alternatives": 1}).json()
    assert answer == {"translatedText": "HUND", "alternatives": ["HUND 1"]}
    assert engine.calls == [("n-best", ["hund"], 6, 2)]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (4, LIMIT_ERROR),
        ("4", LIMIT_ERROR),
        ("9" * 30, LIMIT_ERROR),
        (-1, "invalid request: alternatives parameter must be >= 0"),
        ("-2", "invalid request: alternatives parameter must be >= 0"),
        ("drei", "invalid request: alternatives parameter is not a whole number"),
        (2.5, "invalid request: alternatives parameter is not a whole number"),
        (True, "invalid request: alternatives parameter is not a whole number"),
        ([1], "invalid request: alternatives parameter is not a whole number"),
        ("٣", "invalid request: alternatives parameter is not a whole number"),
    ],
)
def test_bad_alternatives_are_a_400_and_never_reach_the_engine(value: object, message: str) -> None:
    engine = NBestEngine()
    with TestClient(create_app(engine, Settings())) as client:
        answer = client.post("/translate", json={"q": "hund", **PAIR, "alternatives": value})
    assert (answer.status_code, answer.json()) == (400, {"error": message})
    assert engine.calls == []


def test_a_limit_of_0_refuses_every_alternative() -> None:
    with TestClient(create_app(NBestEngine(), Settings(alternatives_limit=0))) as client:
        refused = client.post("/translate", data={"q": "hund", **PAIR, "alternatives": "1"})
        plain = client.post("/translate", data={"q": "hund", **PAIR, "alternatives": "0"})
    assert refused.status_code == 400 and "<= 0" in refused.json()["error"]
    assert plain.json() == {"translatedText": "HUND"}


def test_concurrent_requests_are_batched_with_those_of_the_same_alternatives() -> None:
    engine = NBestEngine()
    app = create_app(engine, Settings())
    asks = [("a", 0), ("b", 2), ("c", 0), ("d", 2), ("e", 1)]

    async def scenario(http: httpx.AsyncClient) -> list[httpx.Response]:
        posts = [http.post("/translate", json={"q": q, **PAIR, "alternatives": n}) for q, n in asks]
        return await asyncio.gather(*posts)

    answers = asyncio.run(in_process(app, scenario))
    assert [answer.json() for answer in answers] == [
        {"translatedText": "A"},
        {"translatedText": "B", "alternatives": ["B 1", "B 2"]},
        {"translatedText": "C"},
        {"translatedText": "D", "alternatives": ["D 1", "D 2"]},
        {"translatedText": "E", "alternatives": ["E 1"]},
    ]
    assert engine.calls == [
        ("lines", ["a", "c"], None, 1),
        ("n-best", ["b", "d"], 3, 3),
        ("n-best", ["e"], 2, 2),
    ]


# --- for real: `mt serve` over a trained run, compared with `mt translate --n-best` ---


@pytest.fixture(scope="module")
def sentences(trained_run: Path) -> list[str]:
    """Three test2016 sentences of one source length: they decode the same in any batch."""
    from mt_cli.decode.translator import Translator
    from mt_cli.trained import load_trained

    return sentences_of_one_length(Translator.of(load_trained(trained_run), device="cpu"))[:3]


@pytest.fixture(scope="module")
def server(trained_run: Path) -> Iterator[ServeProcess]:
    running = start_server(trained_run)  # --alternatives-limit 3, the default
    yield running
    assert running.stop() == 0
    assert "Traceback" not in "".join(running.stderr)


def test_alternatives_are_mt_translates_n_best_rows_2_to_4(server, trained_run, sentences, tmp_path) -> None:
    check_alternatives(server.url, n_best_rows(trained_run, sentences, tmp_path))


def test_over_the_limit_and_bad_alternatives_are_a_400_json_and_plain_requests_are_as_before(
    server, trained_run, sentences, tmp_path
) -> None:
    with httpx.Client(timeout=60) as http:
        url = f"{server.url}/translate"
        over = http.post(url, json={"q": sentences[0], **PAIR, "alternatives": 4})
        negative = http.post(url, data={"q": sentences[0], **PAIR, "alternatives": "-1"})
        words = http.post(url, json={"q": sentences[0], **PAIR, "alternatives": "drei"})
        plain = http.post(url, json={"q": sentences, **PAIR})
    assert (over.status_code, over.json()) == (400, {"error": LIMIT_ERROR})
    assert negative.status_code == 400 and list(negative.json()) == ["error"]
    assert words.status_code == 400 and list(words.json()) == ["error"]
    (tmp_path / "in.de").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "mt_cli", "translate", "--run", str(trained_run), "--device", "cpu"]
    printed = subprocess.run(
        [*command, "-i", str(tmp_path / "in.de")], check=True, capture_output=True, text=True
    )
    assert plain.json() == {"translatedText": printed.stdout.splitlines()}


class WarningEngine(NBestEngine):
    """NBestEngine that warns, as mt's engine does, of each line holding "long" (numbered from 1)
    and once of the whole call."""

    def _warn(self, lines: Sequence[str], warn) -> None:
        for number, line in enumerate(lines, start=1):
            if "long" in line:
                warn(f"line {number}: cut")
        warn("the model is slow")

    def translate_lines(self, lines: Sequence[str], options: TranslateOptions, **given: Any) -> list[str]:
        self._warn(lines, given["warn"])
        return super().translate_lines(lines, options)

    def translate(self, lines: Sequence[str], options: TranslateOptions, **given: Any) -> list[Translation]:
        self._warn(lines, given["warn"])
        return super().translate(lines, options)


@pytest.mark.parametrize("n_best", [1, 3])
def test_each_line_gets_the_warnings_that_name_it_and_those_naming_none(n_best: int) -> None:
    decode = alternatives.decoder(WarningEngine())
    options = TranslateOptions(beam=3, n_best=n_best)
    found = decode(["kurz", "long eins", "long zwei"], options)
    assert [d.warnings for d in found] == [
        ("the model is slow",),
        ("cut", "the model is slow"),
        ("cut", "the model is slow"),
    ]
    assert [len(d.texts) for d in found] == [n_best] * 3 and found[1].texts[0] == "LONG EINS"


def test_a_number_past_the_lines_names_none_of_them() -> None:
    assert alternatives.by_line(["line 3: far", "line 0: before", "line 1: here"], 2) == [
        ("line 3: far", "line 0: before", "here"),
        ("line 3: far", "line 0: before"),
    ]
