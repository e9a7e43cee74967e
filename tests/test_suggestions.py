"""data/suggestions.py: the suggestions database `mt serve --suggestions` writes, opened for
writing (made, checked, a LibreTranslate one given mt's columns) and read back as the training
pairs of a ``source: suggestions`` corpus, with its rules in the recipe."""

from __future__ import annotations

import json
import os
import re
import resource
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import CONFIGS

from mt_cli.config.recipe import load_config
from mt_cli.config.sections import CorpusConfig
from mt_cli.data.corpus import load_corpus, train_fingerprint, train_pairs
from mt_cli.data.suggestion_keys import key_hash, secret_path
from mt_cli.data.suggestions import INSERT, Suggestion, fingerprint, open_for_writing, suggestion_pairs
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.errors import ConfigError, DataError, InputError

WHEN = "2026-01-02T03:04:05.678+00:00"
# LibreTranslate's own table (libretranslate/suggestions.py), as its servers have written it.
LIBRETRANSLATE_TABLE = (
    'CREATE TABLE IF NOT EXISTS suggestions ("q" TEXT NOT NULL, "s" TEXT NOT NULL, '
    '"source" TEXT NOT NULL, "target" TEXT NOT NULL)'
)


def store(path: Path, *rows: tuple[str, str, str, str]) -> None:
    """Rows (q, s, source, target) written as the server writes them."""
    connection = open_for_writing(path)
    with connection:
        connection.execute("BEGIN")
        for q, s, source, target in rows:
            connection.execute(INSERT, Suggestion(q, s, source, target, None, WHEN, None).row())
    connection.close()


def test_rows_read_back_as_line_pairs_of_their_direction_oldest_first(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store(
        db,
        ("Ein Hund.", "A dog.", "de", "en"),
        ("Ein Hund.", "Un chien.", "de", "fr"),  # another direction: not this corpus's
        ("Zwei Katzen.\r\nDrei.", "Two cats.\nThree.", "de", "en"),  # a line for a line
        ("Eins.\nZwei.", "One and two.", "de", "en"),  # counts differ: one pair, lines joined
        ("Ein Mann.", "A man.", "de", "en"),
    )
    assert list(suggestion_pairs(db, "de", "en")) == [
        ("Ein Hund.", "A dog."),
        ("Zwei Katzen.", "Two cats."),
        ("Drei.", "Three."),
        ("Eins. Zwei.", "One and two."),
        ("Ein Mann.", "A man."),
    ]
    assert list(suggestion_pairs(db, "de", "fr")) == [("Ein Hund.", "Un chien.")]
    assert list(suggestion_pairs(db, "fr", "en")) == []
    # What the writer stored, column by column, and the file in WAL mode with its table.
    connection = sqlite3.connect(db)
    assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    row = connection.execute("SELECT * FROM suggestions ORDER BY rowid").fetchone()
    assert row == ("Ein Hund.", "A dog.", "de", "en", None, WHEN, None)


def test_a_corpus_entry_reads_them_with_its_train_limit_and_has_no_evaluation_split(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store(db, *[(f"Satz {k}.", f"Sentence {k}.", "de", "en") for k in range(5)])
    entry = CorpusConfig(source="suggestions", database=str(db), src_lang="de", tgt_lang="en")
    assert list(train_pairs(entry)) == [(f"Satz {k}.", f"Sentence {k}.") for k in range(5)]
    limited = CorpusConfig(
        source="suggestions", database=str(db), src_lang="de", tgt_lang="en", train_limit=2
    )
    assert list(train_pairs(limited)) == [("Satz 0.", "Sentence 0."), ("Satz 1.", "Sentence 1.")]
    assert load_corpus(entry, ["train"])["train"][4] == {"src": "Satz 4.", "tgt": "Sentence 4."}
    with pytest.raises(DataError, match="a suggestions corpus has training pairs only, no val or test split"):
        load_corpus(entry, ["train", "val"])


def test_the_fingerprint_follows_the_rows_not_the_files_time(tmp_path: Path) -> None:
    """In WAL mode a commit goes to the -wal file, so the database file's size and time say
    nothing: the fingerprint is the rows' own."""
    db = tmp_path / "s.db"
    store(db, ("Ein Hund.", "A dog.", "de", "en"))
    entry = CorpusConfig(source="suggestions", database=str(db), src_lang="de", tgt_lang="en")
    first = train_fingerprint(entry)
    assert first["rows"] == 1 and first["direction"] == ["de", "en"] and first["suggestions"] == str(db)
    assert train_fingerprint(entry) == first
    store(db, ("Ein Hund.", "Un chien.", "de", "fr"))  # another direction: the same rows here
    assert train_fingerprint(entry) == first
    store(db, ("Eine Katze.", "A cat.", "de", "en"))
    second = train_fingerprint(entry)
    assert second["rows"] == 2 and second["sha256"] != first["sha256"]
    assert fingerprint(db, "de", "fr")["rows"] == 1


def test_a_libretranslate_database_reads_and_gets_mts_columns(tmp_path: Path) -> None:
    db = tmp_path / "suggestions.db"
    connection = sqlite3.connect(db)
    connection.execute(LIBRETRANSLATE_TABLE)
    # SQLite keeps bytes as bytes, whatever the column's type: UTF-8 is read as text, the rest dropped.
    rows = [
        ("Hallo Welt.", "Hello world.", "de", "en"),
        (b"\xffnot UTF-8", "Bad.", "de", "en"),
        (b"Ja.", "Yes.", "de", "en"),
    ]
    connection.executemany("INSERT INTO suggestions (q, s, source, target) VALUES (?, ?, ?, ?)", rows)
    connection.commit()
    connection.close()
    read = [("Hallo Welt.", "Hello world."), (None, "Bad."), ("Ja.", "Yes.")]
    assert list(suggestion_pairs(db, "de", "en")) == read
    store(db, ("Nein.", "No.", "de", "en"))  # opened for writing: mt's columns added, its rows kept
    columns = [row[1] for row in sqlite3.connect(db).execute("PRAGMA table_info(suggestions)")]
    assert columns == ["q", "s", "source", "target", "translation", "created", "api_key"]
    assert list(suggestion_pairs(db, "de", "en"))[-2:] == [("Ja.", "Yes."), ("Nein.", "No.")]


def serve_with(database: Path, cwd: Path, limit: int | None = None) -> subprocess.CompletedProcess:
    """`mt serve --suggestions DATABASE` over a run that does not exist, under umask 022 and a file
    size limit: the database is opened (made, checked) before the run is looked for."""

    def setup() -> None:
        os.umask(0o022)
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    command = [sys.executable, "-m", "mt_cli", "serve", "--run", str(cwd / "no-run")]
    return subprocess.run(
        [*command, "--suggestions", str(database)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        preexec_fn=setup,
    )


def test_a_file_that_cannot_hold_suggestions_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a database, but long enough to be read as one " * 40)
    other = sqlite3.connect(tmp_path / "other.db")
    other.execute("CREATE TABLE suggestions (text TEXT)")
    other.close()
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "folder").mkdir()
    read_only_wal = tmp_path / "read-only.db"
    connection = sqlite3.connect(read_only_wal)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(LIBRETRANSLATE_TABLE)
    connection.close()
    cases = {
        tmp_path / "missing" / "s.db": "its folder does not exist",
        tmp_path / "folder": "is a directory; give the path of a file",
        tmp_path / "pipe": "is not a regular file (a device or a pipe); give the path of a file",
        tmp_path / "notes.txt": "file is not a database",
        tmp_path / "other.db": "its table suggestions has no column q; give a new file or one that",
    }
    before = sorted(tmp_path.rglob("*"))
    for path, message in cases.items():
        with pytest.raises(InputError) as err:
            open_for_writing(path)
        assert str(err.value).startswith(f"suggestions database {path}: ") and message in str(err.value)
        assert "\n" not in str(err.value)
        assert sorted(tmp_path.rglob("*")) == before, path  # no journal, log or secret left behind
    # A database its user may not write (root may write any file: checked for other users only).
    read_only_wal.chmod(0o444)
    if os.access(read_only_wal, os.W_OK):
        return
    with pytest.raises(InputError, match="attempt to write a readonly database"):
        open_for_writing(read_only_wal)
    assert sorted(tmp_path.rglob("*")) == before


def test_a_failed_open_through_mt_serve_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a database, but long enough to be read as one " * 40)
    before = sorted(tmp_path.rglob("*"))
    for database, limit, message in [
        (tmp_path / "new.db", 5000, "disk I/O error"),  # a full disk while SQLite makes its log
        (tmp_path / "notes.txt", None, "file is not a database"),
        (tmp_path, None, "is a directory"),
    ]:
        result = serve_with(database, tmp_path, limit)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert (
            result.stderr.startswith(f"error: suggestions database {database}: ") and message in result.stderr
        )
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert sorted(tmp_path.rglob("*")) == before, database


def test_mt_serve_makes_the_database_for_its_owner_alone_and_stores_keys_hashed(tmp_path: Path) -> None:
    database = tmp_path / "s.db"
    result = serve_with(database, tmp_path)  # umask 022: a file others may read, unless mt says not
    assert result.returncode == 2 and "run directory" in result.stderr, result.stderr  # made, then no run
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    secret = secret_path(database)
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert sorted(path.name for path in tmp_path.iterdir()) == ["s.db", "s.db.secret"]
    connection = open_for_writing(database)
    connection.execute(INSERT, Suggestion("Hund", "Dog", "de", "en", None, WHEN, "k-one").row())
    connection.close()
    [(key,)] = sqlite3.connect(database).execute("SELECT api_key FROM suggestions").fetchall()
    assert key == key_hash(bytes.fromhex(secret.read_text()), "k-one") and key.startswith("hmac-sha256:")
    assert b"k-one" not in database.read_bytes()
    # The secret is the database's: one others may read, or one that is not a secret, is refused.
    secret.chmod(0o644)
    with pytest.raises(InputError, match=r"may be read by others \(mode 0644\); chmod 600 it$"):
        open_for_writing(database)
    secret.chmod(0o600)
    secret.write_text("not a secret\n")
    with pytest.raises(InputError, match="is not 64 hex digits; restore it"):
        open_for_writing(database)


def test_keys_an_older_mt_stored_as_sent_are_hashed_when_mt_serve_opens_the_database(tmp_path: Path) -> None:
    database = tmp_path / "old.db"
    connection = sqlite3.connect(database)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(
        "CREATE TABLE suggestions (q TEXT NOT NULL, s TEXT NOT NULL, source TEXT NOT NULL, "
        "target TEXT NOT NULL, translation TEXT, created TEXT, api_key TEXT)"
    )
    rows = [
        ("Hund", "Dog", "de", "en", None, WHEN, "clear-key-one"),
        ("Ja", "Yes", "de", "en", None, WHEN, None),
    ]
    connection.executemany("INSERT INTO suggestions VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    connection.commit()
    connection.close()
    assert b"clear-key-one" in database.read_bytes()
    result = serve_with(database, tmp_path)
    assert result.returncode == 2 and "run directory" in result.stderr, result.stderr
    secret = bytes.fromhex(secret_path(database).read_text())
    stored = sqlite3.connect(database).execute("SELECT q, api_key FROM suggestions ORDER BY rowid").fetchall()
    assert stored == [("Hund", key_hash(secret, "clear-key-one")), ("Ja", None)]
    assert not any(b"clear-key-one" in path.read_bytes() for path in tmp_path.iterdir() if path.is_file())
    assert list(suggestion_pairs(database, "de", "en")) == [("Hund", "Dog"), ("Ja", "Yes")]


def test_a_database_that_cannot_be_read_is_a_data_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a database, but long enough to be read as one " * 40)
    sqlite3.connect(tmp_path / "empty.db").execute("CREATE TABLE other (x)").connection.close()
    cases = {
        tmp_path / "none.db": "does not exist; `mt serve --suggestions",
        tmp_path / "notes.txt": "cannot be read (file is not a database)",
        tmp_path / "empty.db": "cannot be read (no such table: suggestions)",
    }
    for path, message in cases.items():
        with pytest.raises(DataError, match=re.escape(message)):
            list(suggestion_pairs(path, "de", "en"))
    assert not (tmp_path / "none.db").exists()  # reading never makes one


@pytest.mark.parametrize(
    ("corpora", "message"),
    [
        (
            [{"source": "suggestions", "database": "s.db"}],
            "data.corpora[0].source=suggestions cannot come first: the first corpus gives the run's",
        ),
        (
            [{"source": "multi30k"}, {"source": "suggestions"}],
            "data.corpora[1].source=suggestions needs data.corpora[1].database: the SQLite file",
        ),
        (
            [{"source": "multi30k"}, {"source": "suggestions", "database": " "}],
            "needs data.corpora[1].database",
        ),
        (
            [
                {"source": "multi30k"},
                {"source": "suggestions", "database": "s.db", "files": {"train": ["a", "b"]}},
            ],
            "data.corpora[1].files has no meaning for source=suggestions; remove it",
        ),
        (
            [{"source": "multi30k", "database": "s.db"}],
            "data.corpora[0].database is a key of source=suggestions; remove it or set data.corpora[0]",
        ),
    ],
)
def test_the_recipe_rules_of_a_suggestions_corpus(corpora: list[dict], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(CONFIGS / "tiny.yaml", [f"data.corpora={json.dumps(corpora)}"])


def test_mt_prepare_encodes_them_with_the_entrys_weight_and_tag(tmp_path: Path) -> None:
    de = read_lines(SHIPPED_MULTI30K / "val.de.gz")[:40]
    en = read_lines(SHIPPED_MULTI30K / "val.en.gz")[:40]
    store(tmp_path / "s.db", *[(src, tgt, "de", "en") for src, tgt in zip(de, en)], ("Ja.", " ", "de", "en"))
    corpora = [
        {"source": "multi30k", "train_limit": 300},
        {"source": "suggestions", "database": "s.db", "weight": 3, "tag": "<sg>"},
    ]
    longer = ["--set", "data.max_len=200", "--set", "model.max_positions=256"]  # no pair too long
    command = [sys.executable, "-m", "mt_cli", "prepare", "--config", "tiny", "--run", "run"]
    command += ["--set", f"data.corpora={json.dumps(corpora)}", *longer]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    line = next(
        x
        for x in result.stdout.splitlines()
        if x.startswith("corpus 2 (suggestions de->en, weight 3, tag <sg>): ")
    )
    assert "41 pairs read, 40 kept; dropped: not UTF-8 0, empty 1" in line
    manifests = [
        json.loads(p.read_text()) for p in sorted((tmp_path / "run" / "prepared").glob("*/manifest.json"))
    ]
    ours = next(m for m in manifests if m["recipe"].get("prefix") == "<sg> ")
    assert ours["pairs"] == 40 and ours["recipe"]["train"]["rows"] == 41
