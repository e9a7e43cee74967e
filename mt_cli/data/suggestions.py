"""The suggestions database: the corrections users send to ``mt serve --suggestions``'s /suggest,
and the same rows read back as training pairs (``source: suggestions`` in ``data.corpora``).

It is one SQLite file whose table ``suggestions`` has LibreTranslate's four columns (``q`` the
text, ``s`` the suggested translation, ``source`` and ``target`` its languages), so a
LibreTranslate ``suggestions.db`` reads as one too, and three of mt's: ``translation`` (the
translation the user corrected, where the client sent it), ``created`` (when it was received,
ISO 8601 in UTC) and ``api_key`` (a keyed hash of the client's key: ``suggestion_keys``). The
file is made readable by its owner alone. The server writes it in WAL mode with
``synchronous=FULL``: a row is on disk when /suggest answers, and a reader (a training run) never
blocks the writer nor sees half of a transaction. Opening a LibreTranslate database for writing
adds mt's three columns to it.

A row is read as pairs of lines: a text of several lines whose suggestion has as many lines gives
one pair per line (as /translate translates it line by line); with counts that differ (only a
database mt did not write can hold such a row) each side's lines are joined with spaces into one
pair; a cell of bytes that are not UTF-8 (SQLite keeps what a writer gives it) is dropped and
counted as not UTF-8. Its training fingerprint is a hash of the rows it reads, so a database that
has grown since a corpus was prepared gives a new prepared corpus.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from mt_cli.config.sections import CorpusConfig
from mt_cli.data.formats import Pair, decoded
from mt_cli.data.suggestion_keys import PREFIX, database_secret, key_hash, secret_path
from mt_cli.errors import DataError, InputError

BUSY_TIMEOUT_MS = 5000  # how long a write waits for another process's (a second server's) lock
REQUIRED = ("q", "s", "source", "target")  # LibreTranslate's columns
ADDED = ("translation", "created", "api_key")  # mt's, added to a LibreTranslate database
_CREATE = (
    "CREATE TABLE IF NOT EXISTS suggestions ("
    "q TEXT NOT NULL, s TEXT NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL, "
    "translation TEXT, created TEXT, api_key TEXT)"
)
# The key is stored hashed (suggestion_keys): ``mt_key_hash`` is open_for_writing's function.
INSERT = (
    "INSERT INTO suggestions (q, s, source, target, translation, created, api_key) "
    "VALUES (?, ?, ?, ?, ?, ?, mt_key_hash(?))"
)
_CLEAR = f"api_key IS NOT NULL AND substr(api_key, 1, {len(PREFIX)}) != '{PREFIX}'"
_CLEAR_KEYS = f"SELECT count(*) FROM suggestions WHERE {_CLEAR}"
_BESIDE = ("-journal", "-wal", "-shm")  # SQLite's files beside a database
_SELECT = "SELECT q, s FROM suggestions WHERE source = ? AND target = ? ORDER BY rowid"


@dataclass(frozen=True)
class Suggestion:
    """One row, in the order of ``INSERT``'s columns."""

    q: str
    s: str
    source: str
    target: str
    translation: str | None
    created: str
    api_key: str | None

    def row(self) -> tuple[Any, ...]:
        return astuple(self)


def open_for_writing(path: Path) -> sqlite3.Connection:
    """A connection that writes ``path`` (created with its table if missing, mode 0600 as the
    umask allows) in WAL mode, each commit synced, its ``INSERT`` hashing the key; clear-text keys
    an older mt stored are hashed now. An InputError naming the path if it cannot be one, and
    then nothing left behind: no new file, journal or secret."""
    if path.exists() and not path.is_file():
        what = "a directory" if path.is_dir() else "not a regular file (a device or a pipe)"
        raise InputError(f"suggestions database {path}: is {what}; give the path of a file")
    before = {side for side in _sides(path) if side.exists()}
    try:
        return _open(path)
    except BaseException:
        for side in _sides(path):
            if side not in before:
                side.unlink(missing_ok=True)
        raise


def _sides(path: Path) -> list[Path]:
    """The database and every file SQLite or mt keeps beside it."""
    return [path, *(path.with_name(path.name + end) for end in _BESIDE), secret_path(path)]


def _open(path: Path) -> sqlite3.Connection:
    if not path.exists():
        _create(path)
    secret = database_secret(path)
    try:
        connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except sqlite3.Error as err:
        raise InputError(f"suggestions database {path}: {err} (does its folder exist?)") from None
    try:
        mode = connection.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            raise InputError(
                f"suggestions database {path}: SQLite cannot keep it in WAL mode (it says {mode}); "
                "give a file on a local disk"
            )
        connection.execute("PRAGMA synchronous=FULL")
        connection.create_function(
            "mt_key_hash", 1, functools.partial(_stored_key, secret), deterministic=True
        )
        connection.execute(_CREATE)
        _add_columns(connection, path)
        _hash_clear_keys(connection)
    except (sqlite3.Error, UnicodeDecodeError) as err:  # SQLite's text of a damaged file may not be UTF-8
        connection.close()
        raise InputError(f"suggestions database {path}: {_reason(err)}") from None
    except InputError:
        connection.close()
        raise
    return connection


def _create(path: Path) -> None:
    """An empty file for SQLite to make the database in, readable by its owner alone (SQLite
    would make it 0644 and give its journal the same mode)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:  # another server made it first
        return
    except FileNotFoundError:
        raise InputError(f"suggestions database {path}: its folder does not exist") from None
    except OSError as err:
        raise InputError(f"suggestions database {path}: cannot create it ({err.strerror})") from None


def _reason(err: sqlite3.Error | UnicodeDecodeError) -> str:
    if isinstance(err, UnicodeDecodeError):
        return "database disk image is malformed"
    return str(err)


def _stored_key(secret: bytes, key: str | bytes | None) -> str | None:
    """The ``api_key`` cell for ``key`` (``mt_key_hash`` in SQL)."""
    return None if key is None else key_hash(secret, key)


def _hash_clear_keys(connection: sqlite3.Connection) -> None:
    """Keys an older mt stored as sent, hashed in place; the clear text is overwritten in the file
    (secure_delete) and the log that held it emptied."""
    clear = connection.execute(_CLEAR_KEYS).fetchone()[0]
    if not clear:
        return
    connection.execute("PRAGMA secure_delete=ON")
    connection.execute("BEGIN IMMEDIATE")
    connection.execute(f"UPDATE suggestions SET api_key = mt_key_hash(api_key) WHERE {_CLEAR}")
    connection.execute("COMMIT")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _add_columns(connection: sqlite3.Connection, path: Path) -> None:
    """mt's columns added to a LibreTranslate table; a table without LibreTranslate's is refused."""
    have = {row[1] for row in connection.execute("PRAGMA table_info(suggestions)")}
    missing = [column for column in REQUIRED if column not in have]
    if missing:
        raise InputError(
            f"suggestions database {path}: its table suggestions has no column {missing[0]}; "
            "give a new file or one that mt serve or LibreTranslate wrote"
        )
    for column in ADDED:
        if column not in have:
            connection.execute(f"ALTER TABLE suggestions ADD COLUMN {column} TEXT")


def database(cfg: CorpusConfig) -> Path:
    """The database file of a ``source: suggestions`` entry."""
    if cfg.database is None:
        raise ValueError("rules.check_data requires database for source=suggestions")
    return Path(cfg.database)


def suggestion_pairs(path: Path, src_lang: str, tgt_lang: str) -> Iterator[Pair]:
    """The (text, suggestion) line pairs of every row in ``src_lang -> tgt_lang``, oldest first."""
    for q, s in _rows(path, src_lang, tgt_lang):
        if q is None or s is None:
            yield q, s
            continue
        q_lines, s_lines = _lines(q), _lines(s)
        if len(q_lines) == len(s_lines):
            yield from zip(q_lines, s_lines)
        else:
            yield " ".join(q_lines), " ".join(s_lines)


def fingerprint(path: Path, src_lang: str, tgt_lang: str) -> dict[str, Any]:
    """What identifies the rows a corpus reads: the file, the direction, their count and hash."""
    digest, rows = hashlib.sha256(), 0
    for row in _rows(path, src_lang, tgt_lang):
        digest.update(json.dumps(row).encode() + b"\n")
        rows += 1
    return {
        "suggestions": str(path.resolve()),
        "direction": [src_lang, tgt_lang],
        "rows": rows,
        "sha256": digest.hexdigest(),
    }


def _rows(path: Path, src_lang: str, tgt_lang: str) -> Iterator[Pair]:
    """(q, s) of each row in the direction, read-only, in one snapshot (a writer may go on)."""
    if not path.is_file():
        raise DataError(
            f"suggestions database {path} does not exist; `mt serve --suggestions {path}` writes it"
        )
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as err:
        raise DataError(f"suggestions database {path} cannot be opened ({err})") from None
    try:
        for q, s in connection.execute(_SELECT, (src_lang, tgt_lang)):
            yield _text(q), _text(s)
    except sqlite3.Error as err:
        raise DataError(
            f"suggestions database {path} cannot be read ({err}); give the file mt serve --suggestions "
            "or LibreTranslate wrote"
        ) from None
    finally:
        connection.close()


def _text(value: Any) -> str | None:
    """A cell as text; None (the pair dropped and counted as not UTF-8) for bytes that are not
    UTF-8: a TEXT column keeps bytes as bytes, and another writer may have given it any."""
    if isinstance(value, bytes):
        return decoded(value)
    return value if isinstance(value, str) else None


def _lines(text: str) -> list[str]:
    """Lines as /translate splits a text: on "\\n", a CR before it dropped."""
    return [line.removesuffix("\r") for line in text.split("\n")]
