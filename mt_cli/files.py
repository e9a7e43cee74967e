"""Reading and writing files the way every command does: atomic writes, UTF-8 lines, early checks.

Every write goes to a temporary file in the target's directory and is renamed into place, so a
crash or Ctrl-C in the middle leaves the previous file (or none), never half of one. Outputs are
checked before any work starts, so a typo in ``--output`` costs nothing.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import itertools
import json
import os
import shutil
import tempfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

from mt_cli.errors import DataError, InputError

READABLE = 0o644


def _temporary_next_to(path: Path) -> tuple[int, str]:
    """A new hidden file ``.NAME.XXXX.tmp`` in ``path``'s directory: renaming it over ``path`` is atomic."""
    return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")


@contextlib.contextmanager
def temporary_directory_next_to(path: Path) -> Iterator[Path]:
    """A new hidden directory beside ``path``, removed on leaving unless renamed away: build a
    directory inside it and rename it to ``path`` last, so ``path`` is whole or absent."""
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def atomic_write_bytes(path: Path, write: Callable[[BinaryIO], Any]) -> None:
    """Call ``write(file)`` on a temporary file next to ``path``, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _temporary_next_to(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, READABLE)  # mkstemp makes it private; the files mt writes are shared results
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of a file's bytes, read in blocks."""
    sha = hashlib.sha256()  # hashlib.file_digest needs Python 3.11; mt supports 3.10
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def write_json(data: Any, path: Path) -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    atomic_write_bytes(path, lambda handle: handle.write(text.encode("utf-8")))


def check_output_path(path: Path, option: str) -> None:
    """InputError unless ``path`` can be created as a file: its directory exists, it is no directory."""
    if path.is_dir():
        raise InputError(f"{option} {path} is a directory; give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{option} {path}: directory {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise InputError(f"{option} {path}: directory {parent} is not writable")


def check_input_file(path: Path, option: str) -> None:
    """InputError unless ``path`` is an existing regular file."""
    if path.is_dir():
        raise InputError(f"{option} {path} is a directory; give a file")
    if not path.exists():
        raise InputError(f"{option} {path} does not exist")


class AtomicTextOutput:
    """A text file written line by line under a temporary name and renamed into place by ``commit``.

    Opened before the work, so an unwritable path fails first; if the work fails or is
    interrupted, ``discard`` removes the temporary file and an existing file at ``path`` is kept.
    """

    def __init__(self, path: Path, option: str = "--output") -> None:
        check_output_path(path, option)
        self.path = path
        fd, self.tmp = _temporary_next_to(path)
        self.handle: IO[str] = os.fdopen(fd, "w", encoding="utf-8", newline="\n")

    def write(self, text: str) -> None:
        self.handle.write(text)

    def flush(self) -> None:
        self.handle.flush()

    def commit(self) -> None:
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        if not self.handle.closed:
            self.handle.close()
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)


def check_readable_file(path: Path) -> None:
    """DataError unless ``path`` is an existing file (not a directory)."""
    if path.is_dir():
        raise DataError(f"{path} is a directory, not a text file")
    if not path.exists():
        raise DataError(f"{path} does not exist")


def open_bytes(path: Path) -> BinaryIO:
    """``path`` for reading bytes, decompressed if its name ends in .gz; DataError if it cannot be."""
    check_readable_file(path)
    try:
        return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        raise DataError(f"{path} does not exist") from None
    except OSError as err:
        raise DataError(f"cannot read {path}: {err.strerror or err}") from None


def read_lines(path: str | Path) -> list[str]:
    """Lines of a UTF-8 text file (gzipped if it ends in .gz), only the line ending removed.

    Splits on "\\n" alone: ``str.splitlines`` also breaks at characters such as U+2028, which
    would silently shift one side of a parallel corpus against the other.
    """
    path = Path(path)
    with open_bytes(path) as handle:
        try:
            raw = handle.read()
        except (OSError, EOFError, zlib.error) as err:
            raise DataError(f"cannot read {path}: {err}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise DataError(f"{path} is not UTF-8 (line {line}); convert it, e.g. with iconv -t UTF-8") from None
    return text_lines(text)


def text_lines(text: str) -> list[str]:
    """Lines of ``text``, split on "\\n" alone (a BOM and CR line endings are dropped)."""
    lines = text.removeprefix("\ufeff").split("\n")
    if lines[-1] == "":  # the final newline ends the last line; it does not start a new one
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def stream_lines(stream: BinaryIO, name: str) -> Iterator[str]:
    """Lines of a binary stream as they arrive (for stdin and big files), decoded as UTF-8.

    Yields each line as soon as its newline is read, so a person typing at a terminal gets an
    answer per line; a line that is not UTF-8 is an InputError naming its number.
    """
    number = 0
    while True:
        try:
            raw = stream.readline()
        except (OSError, EOFError, zlib.error) as err:
            raise InputError(f"cannot read {name} after line {number}: {err}") from None
        if not raw:
            return
        number += 1
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(
                f"{name} is not UTF-8 (line {number}); convert it, e.g. with iconv -t UTF-8"
            ) from None
        if number == 1:
            line = line.removeprefix("\ufeff")
        yield line.removesuffix("\n").removesuffix("\r")


def stream_file_lines(path: Path) -> Iterator[str]:
    """``stream_lines`` of a (possibly gzipped) file, which is closed when the lines run out."""
    with open_bytes(path) as handle:
        yield from stream_lines(handle, str(path))


def batched(lines: Iterator[str], size: int) -> Iterator[list[str]]:
    """Lists of up to ``size`` lines, each handed on as soon as it is full (or the lines end)."""
    while chunk := list(itertools.islice(lines, size)):
        yield chunk


def count_lines(path: Path) -> int | None:
    """Number of lines of a (possibly gzipped) file, for a progress bar's total; None if unreadable
    (reading it for real then reports why)."""
    try:
        with open_bytes(path) as handle:
            count, last = 0, b"\n"
            for block in iter(lambda: handle.read(1 << 20), b""):
                count += block.count(b"\n")
                last = block[-1:]
    except (DataError, OSError, EOFError, zlib.error):
        return None
    return count + (last != b"\n")
