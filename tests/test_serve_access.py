"""Who may ask (``access.py``, ``keys.py``): the --api-keys file with each key's limits, the key
check every route shares, and --req-limit's 429 for one client while another is served; in-process
over a fake engine, clients told apart by their address (the ASGI scope's client) or their key."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from helpers import UpperEngine
from typer.testing import CliRunner

from mt_cli.cli import app as cli
from mt_cli.errors import InputError
from mt_cli.serve import parse
from mt_cli.serve.access import BAD_KEY, NO_KEY, Window
from mt_cli.serve.app import Settings, create_app
from mt_cli.serve.keys import KeyLimits, parse_keys, read_keys

PAIR = {"source": "de", "target": "en"}


@contextlib.asynccontextmanager
async def clients(settings: Settings, *addresses: str) -> AsyncIterator[list[httpx.AsyncClient]]:
    """One client per address, each sending from it (the ASGI scope's client), to one app."""
    app = create_app(UpperEngine(), settings)
    async with app.router.lifespan_context(app), contextlib.AsyncExitStack() as stack:
        made = []
        for address in addresses:
            transport = httpx.ASGITransport(app=app, client=(address, 40000))
            made.append(
                await stack.enter_async_context(httpx.AsyncClient(transport=transport, base_url="http://mt"))
            )
        yield made


# --- the --api-keys file -----------------------------------------------------------------------


def test_a_key_line_may_carry_its_own_limits() -> None:
    lines = [
        "# staff",
        "",
        "  plain  ",
        "counted 120",
        "named req_limit=0 char_limit=20000",
        "chars char_limit=9",
    ]
    assert parse_keys(lines, "keys.txt") == {
        "plain": KeyLimits(),
        "counted": KeyLimits(req_limit=120),
        "named": KeyLimits(req_limit=0, char_limit=20000),
        "chars": KeyLimits(char_limit=9),
    }


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("k secret2", "word 2 is not a limit; write KEY, KEY N or KEY req_limit=N char_limit=N"),
        ("k 10 20", "word 3 is not a limit"),
        ("k req_limit=-1", "req_limit '-1' is not a whole number >= 0"),
        ("k char_limit=ten", "char_limit 'ten' is not a whole number >= 0"),
        ("k req_limit=1 req_limit=2", "req_limit is given twice"),
        ("k char_limit=0", "char_limit 0 would refuse every request; give at least 1"),
        ("one", "this key is also on an earlier line"),
    ],
)
def test_a_bad_key_line_is_one_line_naming_its_number(line: str, message: str) -> None:
    with pytest.raises(InputError) as refused:
        parse_keys(["# keys", "one", line], "--api-keys keys.txt")
    assert str(refused.value).startswith("--api-keys keys.txt line 3: ") and message in str(refused.value)
    assert "secret2" not in str(refused.value)  # a second key on the line by mistake is never printed


def test_a_bad_keys_file_stops_mt_serve_with_exit_2_before_the_model(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("good\nbad req_limit=x\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["serve", "--run", str(tmp_path / "no-run"), "--api-keys", str(keys)])
    assert result.exit_code == 2
    assert (
        result.stderr.strip() == f"error: --api-keys {keys} line 2: req_limit 'x' is not a whole number >= 0"
    )
    keys.write_text("# only a comment\n", encoding="utf-8")
    with pytest.raises(InputError, match="holds no key"):
        read_keys(keys)


# --- the sliding window ------------------------------------------------------------------------


def test_the_window_slides_and_forgets_clients_that_stopped() -> None:
    now = [0.0]
    window = Window(span=60.0, clock=lambda: now[0])
    assert [window.admit(("address", "a"), 2) for _ in range(2)] == [None, None]
    now[0] = 20.0
    assert window.admit(("address", "a"), 2) == 40  # the first request leaves the window at 60 s
    assert window.admit(("address", "b"), 2) is None  # another client is counted apart
    now[0] = 60.5
    assert window.admit(("address", "a"), 2) is None  # the first left; the refused one never counted
    for second in range(61, 300):  # many clients, each once: at most two windows' are kept
        now[0] = float(second)
        window.admit(("address", f"c{second}"), 2)
    assert len(window) <= 2 * 60


# --- the app: one client refused, another served -----------------------------------------------


def test_a_client_over_req_limit_gets_429_while_another_is_served() -> None:
    async def scenario() -> tuple[list[httpx.Response], list[httpx.Response]]:
        async with clients(Settings(req_limit=2), "10.0.0.1", "10.0.0.2") as (first, second):
            mine = [await first.post("/translate", json={"q": f"hund {k}", **PAIR}) for k in range(3)]
            mine.append(await first.post("/detect", json={"q": "hund"}))  # every route counts
            theirs = [await second.post("/translate", json={"q": "katze", **PAIR}) for _ in range(2)]
            return mine, theirs

    mine, theirs = asyncio.run(scenario())
    assert [answer.status_code for answer in mine] == [200, 200, 429, 429]
    assert mine[2].json() == {"error": "Slowdown: 2 per 1 minute"}  # LibreTranslate's words
    assert 1 <= int(mine[2].headers["retry-after"]) <= 60
    assert [(answer.status_code, answer.json()) for answer in theirs] == [
        (200, {"translatedText": "KATZE"})
    ] * 2


def test_with_keys_each_key_is_a_client_with_its_own_limits() -> None:
    keys = {
        "small": KeyLimits(req_limit=1, char_limit=5),
        "big": KeyLimits(char_limit=8000),
        "open": KeyLimits(),
    }
    settings = Settings(api_keys=keys, req_limit=3)

    async def scenario() -> list[httpx.Response]:
        async with clients(settings, "10.0.0.1") as (http,):  # one address: the keys tell them apart
            sent = [
                http.post("/translate", json={"q": "hund", **PAIR, "api_key": "small"}),
                http.post("/translate", json={"q": "katze", **PAIR, "api_key": "small"}),
                *[http.post("/translate", json={"q": "maus", **PAIR, "api_key": "open"}) for _ in range(3)],
                http.post("/translate", json={"q": "maus", **PAIR, "api_key": "open"}),
                http.post("/translate", json={"q": "hund " * 1500, **PAIR, "api_key": "big"}),
                http.post("/translate", json={"q": "hund " * 1700, **PAIR, "api_key": "big"}),
            ]
            return [await request for request in sent]

    answers = asyncio.run(scenario())
    assert [answer.status_code for answer in answers] == [200, 429, 200, 200, 200, 429, 200, 400]
    assert answers[1].json() == {"error": "Slowdown: 1 per 1 minute"}  # the key's own limit
    assert answers[5].json() == {"error": "Slowdown: 3 per 1 minute"}  # --req-limit, for a key without
    assert "over this server's 8000" in answers[7].json()["error"]  # past --max-chars: the key's own


def test_a_keys_char_limit_below_max_chars_refuses_a_longer_request() -> None:
    settings = Settings(api_keys={"small": KeyLimits(char_limit=5)})

    async def scenario() -> httpx.Response:
        async with clients(settings, "10.0.0.1") as (http,):
            return await http.post("/detect", json={"q": "Hunde!", "api_key": "small"})

    answer = asyncio.run(scenario())
    assert answer.status_code == 400 and "q has 6 characters, over this server's 5" in answer.json()["error"]


def test_every_route_checks_the_key_once_and_reads_its_body_once(monkeypatch) -> None:
    reads = []
    read_fields = parse.read_fields

    async def counted(*args: object) -> dict[str, object]:
        reads.append(1)
        return await read_fields(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(parse, "read_fields", counted)
    settings = Settings(api_keys={"k": KeyLimits()})
    upload = {"file": ("a.txt", b"Ein Hund.")}

    async def scenario() -> list[httpx.Response]:
        async with clients(settings, "10.0.0.1") as (http,):
            answers = []
            for key in ({}, {"api_key": "nope"}):
                answers.append(await http.post("/translate", json={"q": "hund", **PAIR, **key}))
                answers.append(await http.post("/detect", data={"q": "hund", **key}))
                answers.append(await http.post("/translate_file", data={**PAIR, **key}, files=upload))
            # No letters: answered without loading lingua's models.
            answers.append(await http.post("/detect", json={"q": "42", "api_key": "k"}))
            return answers

    answers = asyncio.run(scenario())
    expected = [{"error": NO_KEY}] * 3 + [{"error": BAD_KEY}] * 3
    assert [(answer.status_code, answer.json()) for answer in answers[:6]] == [
        (403, body) for body in expected
    ]
    assert answers[6].status_code == 200
    assert len(reads) == 5  # one read of each JSON or form body (the file's is its own)
