"""The API keys of the suggestions database, stored as a keyed hash, never as the client sent them.

A row's ``api_key`` is ``hmac-sha256:`` and the hex HMAC-SHA256 of the key under the database's
secret: 32 random bytes, as 64 hex digits, in a file beside it (``suggestions.db.secret``) that
only its owner may read (mode 0600). A copy of the database (a training machine's, a data
set's) then tells which rows came from the same key, but not the key, and no key can be guessed
from it without the secret, however short; the server's operator, who has the secret, finds a
key's rows by its hash (``key_hash``). The secret is made when the database is first opened for
writing; a secret file others may read, or one mt did not write, is refused in one line.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from mt_cli.errors import InputError

PREFIX = "hmac-sha256:"  # how a hashed key starts; anything else in the column is clear text
SECRET_BYTES = 32


def secret_path(database: Path) -> Path:
    """The file of ``database``'s secret: its name with ``.secret`` added."""
    return database.with_name(database.name + ".secret")


def key_hash(secret: bytes, key: str | bytes) -> str:
    """What the database stores for ``key``."""
    raw = key if isinstance(key, bytes) else key.encode("utf-8", "surrogatepass")
    return PREFIX + hmac.new(secret, raw, hashlib.sha256).hexdigest()


def database_secret(database: Path) -> bytes:
    """``database``'s secret, made now if it has none; an InputError in one line if its file
    cannot be made or is not one mt wrote for this owner alone."""
    path = secret_path(database)
    if not path.exists():
        _make(path)
    return _read(path)


def _make(path: Path) -> None:
    """A new secret at ``path``, written whole under a temporary name and linked into place, so a
    second server starting at the same moment reads one secret or the other, never half of one."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, (secrets.token_hex(SECRET_BYTES) + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(temporary, path)
    except FileExistsError:  # another server made it first: that one is the database's
        pass
    except OSError as err:
        raise InputError(
            f"cannot write the secret {path} of the suggestions database: {err.strerror}"
        ) from None
    finally:
        temporary.unlink(missing_ok=True)


def _read(path: Path) -> bytes:
    """The secret in ``path``, checked: a regular file only its owner may read, 64 hex digits."""
    try:
        with open(path, "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            text = handle.read(4 * SECRET_BYTES)
    except OSError as err:
        raise InputError(
            f"cannot read the secret {path} of the suggestions database: {err.strerror}"
        ) from None
    if not stat.S_ISREG(mode):
        raise InputError(f"the secret {path} of the suggestions database is not a file; remove it")
    if mode & 0o077:
        raise InputError(
            f"the secret {path} of the suggestions database may be read by others "
            f"(mode {stat.S_IMODE(mode):04o}); chmod 600 it"
        )
    try:
        secret = bytes.fromhex(text.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        secret = b""
    if len(secret) != SECRET_BYTES:
        raise InputError(
            f"the secret {path} of the suggestions database is not {2 * SECRET_BYTES} hex digits; "
            "restore it (the database's keys were hashed with it), or move both aside to start anew"
        )
    return secret
