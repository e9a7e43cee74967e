"""data/suggestions.py: the suggestions database `mt serve --suggestions` writes, opened for
writing (made, checked, a LibreTranslate one given mt's columns) and read back as the training
pairs of a ``source: suggestions`` corpus, with its rules in the recipe."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import CONFIGS

from mt_cli.config.recipe import load_config
from mt_cli.config.sections import CorpusConfig
from mt_cli.data.corpus import load_corpus, train_fingerprint, train_pairs
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


def test_a_file_that_cannot_hold_suggestions_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a database, but long enough to be read as one " * 40)
    other = sqlite3.connect(tmp_path / "other.db")
    other.execute("CREATE TABLE suggestions (text TEXT)")
    other.close()
    cases = {
        tmp_path / "missing" / "s.db": "unable to open database file (does its folder exist?)",
        tmp_path: "unable to open database file (does its folder exist?)",
        tmp_path / "notes.txt": "file is not a database",
        tmp_path / "other.db": "its table suggestions has no column q; give a new file or one that",
    }
    for path, message in cases.items():
        with pytest.raises(InputError) as err:
            open_for_writing(path)
        assert str(err.value).startswith(f"suggestions database {path}: ") and message in str(err.value)
        assert "\n" not in str(err.value)
    assert not (tmp_path / "missing").exists()


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
