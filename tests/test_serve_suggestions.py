"""serve/suggestions.py: LibreTranslate's /suggest, stored by one writer thread in the suggestions
database, and a model fine-tuned on what was stored.

The real server (`mt serve --suggestions` over a run trained by `mt train`) takes a thousand
concurrent suggestions from threads of a real HTTP client and keeps every one; killed with
SIGKILL in the middle of a stream of them, it leaves a database that opens with every row it had
acknowledged; and a warm start on the stored rows trains end to end. What needs no model (the
answers to bad input, a disabled server, a commit that fails, a full queue) runs in-process.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest
from helpers import ServeProcess, in_process, start_server

from mt_cli.config.options import TranslateOptions
from mt_cli.data.suggestion_keys import key_hash, secret_path
from mt_cli.data.suggestions import Suggestion, suggestion_pairs
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.serve.app import Settings, create_app
from mt_cli.serve.errors import ApiError
from mt_cli.serve.keys import KeyLimits
from mt_cli.serve.suggestions import DISABLED, Store

KEYS = ["k-one", "k-two"]
PAIR = {"source": "de", "target": "en"}
MAX_CHARS = 200
CONCURRENT = 1000


class NoEngine:
    """A de -> en engine that /suggest never asks for a translation."""

    src_lang, tgt_lang, beam_size, origin, parallel_batches = "de", "en", 1, "none", 1

    def count_pieces(self, lines: list[str]) -> list[int]:
        return [len(line.split()) + 1 for line in lines]

    directions = (("de", "en"),)

    def resolve(self, options: TranslateOptions) -> TranslateOptions:
        return options

    def translate(self, lines: Sequence[str], options: TranslateOptions, **_: object) -> list:
        raise AssertionError("/suggest translated")


def rows(database: Path) -> list[tuple]:
    connection = sqlite3.connect(database)
    try:
        return connection.execute("SELECT * FROM suggestions ORDER BY rowid").fetchall()
    finally:
        connection.close()


def hashed(database: Path, key: str) -> str:
    """What the database stores for ``key``: its keyed hash under the database's secret."""
    return key_hash(bytes.fromhex(secret_path(database).read_text()), key)


# --- in-process: the answers ------------------------------------------------------------------


def test_off_by_default_as_in_libretranslate(tmp_path: Path) -> None:
    async def scenario(http: httpx.AsyncClient) -> tuple[httpx.Response, dict]:
        answer = await http.post("/suggest", data={"q": "Hund", "s": "Dog", **PAIR})
        return answer, (await http.get("/frontend/settings")).json()

    answer, settings = asyncio.run(in_process(create_app(NoEngine(), Settings()), scenario))
    assert (answer.status_code, answer.json()) == (403, {"error": DISABLED})
    assert DISABLED == "Suggestions are disabled on this server."  # LibreTranslate's words
    assert settings["suggestions"] is False
    on = create_app(NoEngine(), Settings(suggestions=tmp_path / "s.db"))
    assert asyncio.run(in_process(on, lambda http: http.get("/frontend/settings"))).json()["suggestions"]


BAD = [  # (what is wrong, fields, the answer's one line)
    ("no q", {"s": "Dog", **PAIR}, "invalid request: missing q parameter"),
    ("no s", {"q": "Hund", **PAIR}, "invalid request: missing s parameter"),
    ("empty s", {"q": "Hund", "s": "", **PAIR}, "invalid request: missing s parameter"),
    ("blank s", {"q": "Hund", "s": " \t ", **PAIR}, "invalid request: s is blank"),
    ("no source", {"q": "Hund", "s": "Dog", "target": "en"}, "invalid request: missing source parameter"),
    ("no target", {"q": "Hund", "s": "Dog", "source": "de"}, "invalid request: missing target parameter"),
    ("a list q", {"q": ["Hund"], "s": "Dog", **PAIR}, "invalid request: q must be a string"),
    ("a number s", {"q": "Hund", "s": 5, **PAIR}, "invalid request: s must be a string"),
    (
        "oversized q",
        {"q": "x" * (MAX_CHARS + 1), "s": "Dog", **PAIR},
        f"invalid request: q has {MAX_CHARS + 1} characters, over this server's {MAX_CHARS}",
    ),
    (
        "oversized s",
        {"q": "Hund", "s": "y" * (MAX_CHARS + 5), **PAIR},
        f"invalid request: s has {MAX_CHARS + 5} characters, over this server's {MAX_CHARS}",
    ),
    (
        "oversized translation",
        {"q": "Hund", "s": "Dog", "translatedText": "z" * (MAX_CHARS + 1), **PAIR},
        f"invalid request: translatedText has {MAX_CHARS + 1} characters, over this server's {MAX_CHARS}",
    ),
    (
        "wrong language",
        {"q": "Chien", "s": "Dog", "source": "fr", "target": "en"},
        "fr -> en is not available; this server translates de -> en",
    ),
    (
        "reversed",
        {"q": "Dog", "s": "Hund", "source": "en", "target": "de"},
        "en -> de is not available; this server translates de -> en",
    ),
    (
        "auto",
        {"q": "Hund", "s": "Dog", "source": "auto", "target": "en"},
        "invalid request: source must be the language of q; auto is not accepted here",
    ),
    (
        "lines differ",
        {"q": "Hund.\nKatze.", "s": "Dog.", **PAIR},
        "invalid request: q has 2 lines and s 1; give one line of s for each line of q",
    ),
]


@pytest.mark.parametrize(("case", "fields", "message"), BAD, ids=[case for case, _, _ in BAD])
def test_bad_input_is_a_400_in_one_line_and_stores_nothing(
    tmp_path: Path, case: str, fields: dict, message: str
) -> None:
    database = tmp_path / "s.db"
    app = create_app(NoEngine(), Settings(max_chars=MAX_CHARS, suggestions=database))

    async def scenario(http: httpx.AsyncClient) -> list[httpx.Response]:
        answers = [await http.post("/suggest", json=fields)]
        if all(isinstance(value, str) for value in fields.values()):  # a form has only strings
            answers.append(await http.post("/suggest", data=fields))
        return answers

    for answer in asyncio.run(in_process(app, scenario)):
        assert (answer.status_code, answer.json()) == (400, {"error": message}), case
    assert rows(database) == []


def test_keys_are_checked_and_stored_as_a_keyed_hash_in_a_file_for_its_owner(tmp_path: Path) -> None:
    database = tmp_path / "s.db"
    app = create_app(NoEngine(), Settings(api_keys=dict.fromkeys(KEYS, KeyLimits()), suggestions=database))
    good = {"q": "Hund", "s": "Dog", **PAIR}

    async def scenario(http: httpx.AsyncClient) -> list[httpx.Response]:
        return [
            await http.post("/suggest", json=good),
            await http.post("/suggest", json={**good, "api_key": "nope"}),
            await http.post("/suggest", json={**good, "api_key": KEYS[1], "translatedText": "Hound"}),
        ]

    missing, wrong, keyed = asyncio.run(in_process(app, scenario))
    assert (missing.status_code, missing.json()) == (
        403,
        {"error": "this server needs an API key: send api_key"},
    )
    assert (wrong.status_code, wrong.json()) == (403, {"error": "invalid API key"})
    assert (keyed.status_code, keyed.json()) == (200, {"success": True})
    [(q, s, source, target, translation, created, key)] = rows(database)
    assert (q, s, source, target, translation, key) == (
        "Hund",
        "Dog",
        "de",
        "en",
        "Hound",
        hashed(database, KEYS[1]),
    )
    assert not any(KEYS[1].encode() in path.read_bytes() for path in tmp_path.iterdir())
    assert stat.S_IMODE(database.stat().st_mode) & 0o077 == 0
    assert timedelta(0) <= datetime.now(timezone.utc) - datetime.fromisoformat(created) < timedelta(minutes=1)


def test_a_failed_commit_is_a_503_and_the_writer_goes_on(tmp_path: Path) -> None:
    database = tmp_path / "s.db"
    app = create_app(NoEngine(), Settings(suggestions=database))

    async def scenario(http: httpx.AsyncClient) -> list[httpx.Response]:
        # The server has made the table; a trigger now fails every insert, as a full disk would.
        connection = sqlite3.connect(database)
        connection.execute(
            "CREATE TRIGGER full BEFORE INSERT ON suggestions BEGIN SELECT RAISE(ABORT, 'disk full'); END"
        )
        connection.commit()
        failed = await http.post("/suggest", json={"q": "Hund", "s": "Dog", **PAIR})
        connection.execute("DROP TRIGGER full")
        connection.commit()
        connection.close()
        return [failed, await http.post("/suggest", json={"q": "Katze", "s": "Cat", **PAIR})]

    failed, stored = asyncio.run(in_process(app, scenario))
    assert failed.status_code == 503 and failed.json() == {
        "error": "cannot store the suggestion now: disk full"
    }
    assert failed.headers["retry-after"] == "5"
    assert (stored.status_code, stored.json()) == (200, {"success": True})
    assert [row[:2] for row in rows(database)] == [("Katze", "Cat")]


def test_a_full_queue_is_a_429_and_what_was_queued_is_stored(tmp_path: Path) -> None:
    """Another process holds the write lock: the writer waits (up to its busy timeout) with one
    group taken, one more row may wait in a queue of one, and the rest are refused at once."""
    database = tmp_path / "s.db"
    suggestions = [
        Suggestion(f"Satz {k}.", f"Sentence {k}.", "de", "en", None, "now", None) for k in range(12)
    ]

    async def scenario() -> list[BaseException | None]:
        store = Store(database, max_pending=1)
        await store.start()
        lock = sqlite3.connect(database, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")
        asyncio.get_running_loop().call_later(0.5, lock.execute, "COMMIT")
        answers = await asyncio.gather(*map(store.add, suggestions), return_exceptions=True)
        await store.close()
        lock.close()
        return answers

    answers = asyncio.run(scenario())
    refused = [answer for answer in answers if isinstance(answer, ApiError)]
    assert all(answer is None or isinstance(answer, ApiError) for answer in answers), answers
    assert refused and all(err.status == 429 and err.headers == {"Retry-After": "1"} for err in refused)
    stored = [suggestion.q for suggestion, answer in zip(suggestions, answers) if answer is None]
    assert stored and [row[0] for row in rows(database)] == stored


# --- the real server --------------------------------------------------------------------------


@pytest.fixture
def suggesting(trained_run: Path, tmp_path: Path) -> Iterator[tuple[ServeProcess, Path]]:
    """`mt serve --suggestions` with keys, and its database."""
    keys, database = tmp_path / "keys.txt", tmp_path / "suggestions.db"
    keys.write_text("\n".join(KEYS) + "\n")
    running = start_server(trained_run, "--suggestions", str(database), "--api-keys", str(keys))
    yield running, database
    running.kill()


def test_a_thousand_concurrent_suggestions_are_all_stored(suggesting: tuple[ServeProcess, Path]) -> None:
    server, database = suggesting
    start = threading.Barrier(CONCURRENT)
    answers: list[tuple[int, dict] | None] = [None] * CONCURRENT

    def suggest(k: int) -> None:
        fields = {"q": f"Satz {k}.", "s": f"Sentence {k}.", **PAIR, "api_key": KEYS[k % 2]}
        fields |= {"translatedText": f"Set {k}."} if k % 3 else {}
        # A client each: one httpx.Client shared by 1,000 threads loses a connection now and then
        # (httpcore.ReadError "Bad file descriptor"), a fault of the client's pool, not the server's.
        # verify=False: plain HTTP; a client that verifies loads the CA bundle (~50 ms each, most
        # of this test's time on a 2-core Xeon), for the TLS it never speaks here.
        with httpx.Client(timeout=120, verify=False) as http:
            start.wait()
            answer = http.post(f"{server.url}/suggest", **({"json": fields} if k % 2 else {"data": fields}))
        answers[k] = (answer.status_code, answer.json())

    threads = [threading.Thread(target=suggest, args=(k,)) for k in range(CONCURRENT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [(200, {"success": True})] * CONCURRENT
    stored = {row[:5] + row[6:] for row in rows(database)}
    assert len(rows(database)) == CONCURRENT
    assert stored == {
        (
            f"Satz {k}.",
            f"Sentence {k}.",
            "de",
            "en",
            f"Set {k}." if k % 3 else None,
            hashed(database, KEYS[k % 2]),
        )
        for k in range(CONCURRENT)
    }
    assert server.stop() == 0
    assert "Traceback" not in "".join(server.stderr)
    assert not Path(f"{database}-wal").exists()  # a clean stop checkpoints the log into the file


def test_sigkill_during_writes_leaves_every_acknowledged_row(suggesting: tuple[ServeProcess, Path]) -> None:
    server, database = suggesting
    acknowledged: list[str] = []
    stop = threading.Event()

    def keep_suggesting(worker: int) -> None:
        with httpx.Client(timeout=30) as http:
            for k in range(100_000):
                q = f"Satz {worker}-{k}."
                try:
                    answer = http.post(
                        f"{server.url}/suggest", json={"q": q, "s": "S.", **PAIR, "api_key": KEYS[0]}
                    )
                except httpx.TransportError:  # the server is gone
                    return
                if answer.status_code == 200 and answer.json() == {"success": True}:
                    acknowledged.append(q)
                if stop.is_set():
                    return

    workers = [threading.Thread(target=keep_suggesting, args=(worker,)) for worker in range(16)]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 60
    while len(acknowledged) < 300 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(server.process.pid, signal.SIGKILL)  # in the middle of the stream: no stop, no checkpoint
    server.process.wait()
    stop.set()
    for worker in workers:
        worker.join()
    assert len(acknowledged) >= 300
    assert Path(f"{database}-wal").exists()  # the log the killed writer left: recovered on opening

    # Read first as a training run reads it (read-only), then opened as any program would.
    read = {q for q, _ in suggestion_pairs(database, "de", "en")}
    connection = sqlite3.connect(database)
    assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    stored = [q for (q,) in connection.execute("SELECT q FROM suggestions")]
    connection.close()
    assert set(acknowledged) <= set(stored) and len(stored) == len(set(stored)) and read == set(stored)


def test_a_served_model_fine_tunes_on_its_users_suggestions(trained_run: Path, tmp_path: Path) -> None:
    """Serve the run, send it corrections of its translations (test2016 references), fine-tune
    a child on them with `mt train --init-from`: the corrections become likelier under the child
    than under its parent, by more than other test2016 pairs do (it learnt them, not the task)."""
    from mt_cli.decode.translator import Translator
    from mt_cli.trained import load_trained

    database = tmp_path / "suggestions.db"
    test = [read_lines(SHIPPED_MULTI30K / f"test_2016_flickr.{lang}.gz") for lang in ("de", "en")]
    sources, references = test[0][:40], test[1][:40]
    held_out = test[0][100:140], test[1][100:140]
    server = start_server(trained_run, "--suggestions", str(database))
    try:
        with httpx.Client(timeout=60) as http:
            for q, s in zip(sources, references):
                machine = http.post(f"{server.url}/translate", json={"q": q, **PAIR}).json()["translatedText"]
                fields = {"q": q, "s": s, "translatedText": machine, **PAIR}
                assert http.post(f"{server.url}/suggest", data=fields).json() == {"success": True}
        assert server.stop() == 0
    finally:
        server.kill()

    corpora = [
        {"source": "multi30k", "train_limit": 200},
        {"source": "suggestions", "database": str(database), "weight": 20},
    ]
    child = tmp_path / "child"
    settings = [f"data.corpora={json.dumps(corpora)}", "data.max_len=60"]  # every pair kept
    settings += ["train.max_steps=12", "train.validate_every_steps=12", "train.schedule=constant"]
    settings += ["train.warmup_steps=0", "train.amp=off", "train.test_at_end=false", "train.average_last=0"]
    settings += ["train.val_bleu=false"]
    command = [sys.executable, "-m", "mt_cli", "train", "--config", "tiny", "--run", str(child)]
    command += ["--init-from", str(trained_run), "--device", "cpu"]
    command += [arg for setting in settings for arg in ("--set", setting)]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "corpus 2 (suggestions de->en, weight 20): 40 pairs read, 40 kept" in done.stderr
    manifests = [json.loads(p.read_text()) for p in (child / "prepared").glob("*/manifest.json")]
    ours = next(m for m in manifests if "rows" in m["recipe"]["train"])
    assert (ours["read"], ours["pairs"], ours["recipe"]["train"]["rows"]) == (40, 40, 40)

    def log_prob_per_piece(run: Path, checkpoint: str | None, pairs: tuple[list[str], list[str]]) -> float:
        scores = Translator.of(load_trained(run, checkpoint), device="cpu").score(*pairs)
        return sum(score.log_prob for score in scores) / sum(score.tokens for score in scores)

    # last.pt: best.pt is chosen on the Multi30k validation set, which these updates need not improve.
    learnt = [
        log_prob_per_piece(child, "last", pairs) - log_prob_per_piece(trained_run, None, pairs)
        for pairs in ((sources, references), held_out)
    ]
    assert learnt[0] > 0 and learnt[0] > learnt[1], learnt
