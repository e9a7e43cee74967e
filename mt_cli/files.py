"""Reading and writing files the way every command does: atomic writes, UTF-8 lines, early checks.

Every write goes to a temporary file in the target's directory and is renamed into place, so a
crash or Ctrl-C in the middle leaves the previous file (or none), never half of one. Outputs are
checked before any work starts, so a typo in ``--output`` costs nothing.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import io
import itertools
import json
import os
import shutil
import tempfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

from mt_cli.errors import DataError, InputError, RunFailure

READABLE = 0o644
# What a failed write says, by errno; anything else gives the system's own words.
_WRITE_REASONS = {
    errno.ENOSPC: "the disk is full; free some space",
    errno.EDQUOT: "the disk quota is used up; free some space",
    errno.EROFS: "the file system is read-only; write somewhere else",
    errno.EACCES: "permission denied; write somewhere else",
    errno.EPERM: "operation not permitted; write somewhere else",
    errno.EFBIG: "the file grew too large for the file system or this process's limit (ulimit -f)",
}


def write_failure(path: Path, err: OSError) -> RunFailure:
    """The one-line error for a write to ``path`` that failed midway (exit 3: the machine's fault)."""
    reason = _WRITE_REASONS.get(err.errno, err.strerror or str(err))
    return RunFailure(f"cannot write {path}: {reason}, then run the command again")


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn an OSError while writing ``path`` (a file or a directory tree) into ``write_failure``."""
    try:
        yield
    except OSError as err:
        raise write_failure(path, err) from None


def _temporary_next_to(path: Path) -> tuple[int, str]:
    """A new hidden file ``.NAME.XXXX.tmp`` in ``path``'s directory: renaming it over ``path`` is atomic."""
    return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")


@contextlib.contextmanager
def temporary_directory_next_to(path: Path) -> Iterator[Path]:
    """A new hidden directory beside ``path``, removed on leaving unless renamed away: build a
    directory inside it and rename it to ``path`` last, so ``path`` is whole or absent.

    An OSError inside (a full disk, a read-only place) is ``write_failure`` naming ``path``.
    """
    with writing(path):
        staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
        try:
            yield staging
        finally:
            shutil.rmtree(staging, ignore_errors=True)


class _RecordedWrites:
    """A binary file that remembers the OSError of a failed write: writers such as ``torch.save``
    catch it and raise their own RuntimeError ("enforce fail at inline_container.cc"), which
    would hide that the disk was full."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle, self.error = handle, None

    def write(self, data: Any) -> int:
        try:
            return self.handle.write(data)
        except OSError as err:
            self.error = err
            raise

    def __getattr__(self, name: str) -> Any:  # seek, tell, flush, ...: the file's own
        return getattr(self.handle, name)


def atomic_write_bytes(path: Path, write: Callable[[BinaryIO], Any]) -> None:
    """Call ``write(file)`` on a temporary file next to ``path``, then rename it into place.

    A failed write (disk full, read-only, too large) is a RunFailure naming ``path``; the
    temporary file is removed and an earlier ``path`` stays as it was.
    """
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _temporary_next_to(path)
        with os.fdopen(fd, "wb") as handle:
            recorded = _RecordedWrites(handle)
            try:
                write(recorded)  # type: ignore[arg-type]
            except Exception:
                if recorded.error is not None:  # whatever the writer made of it, the write failed
                    raise recorded.error from None
                raise
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, READABLE)  # mkstemp makes it private; the files mt writes are shared results
        os.replace(tmp, path)
    except OSError as err:
        raise write_failure(path, err) from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of a file's bytes, read in blocks."""
    sha = hashlib.sha256()  # hashlib.file_digest needs Python 3.11; mt supports 3.10
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def json_digest(data: Any) -> str:
    """16 hex digits of the SHA-256 of ``data`` as canonical JSON (sorted keys): a cache key."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()[:16]


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
    try:  # access() says yes to root even where nothing can be made (a read-only mount, /sys): try it
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as err:
        raise InputError(
            f"{option} {path}: directory {parent} is not writable ({err.strerror or err}); write elsewhere"
        ) from None


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
        with writing(path):
            fd, self.tmp = _temporary_next_to(path)
        self.handle: IO[str] = os.fdopen(fd, "w", encoding="utf-8", newline="\n")

    def write(self, text: str) -> None:
        with writing(self.path):
            self.handle.write(text)

    def flush(self) -> None:
        with writing(self.path):
            self.handle.flush()

    def commit(self) -> None:
        with writing(self.path):
            self.handle.flush()
            os.fsync(self.handle.fileno())
            self.handle.close()
            os.replace(self.tmp, self.path)

    def discard(self) -> None:
        if not self.handle.closed:
            # Closing flushes what is buffered; after a failed write that fails again, and the
            # file is removed anyway (the handle is closed all the same).
            with contextlib.suppress(OSError):
                self.handle.close()
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)


def check_readable_file(path: Path) -> None:
    """DataError unless ``path`` is an existing file (not a directory)."""
    if path.is_dir():
        raise DataError(f"{path} is a directory, not a text file")
    if not path.exists():
        raise DataError(f"{path} does not exist")


def read_failure(path: Path, err: OSError | EOFError | zlib.error) -> DataError:
    """The one-line error for a file that could not be read to its end (exit 2: fix the file)."""
    if isinstance(err, gzip.BadGzipFile) and str(err).startswith("Not a gzipped file"):
        return DataError(f"{path} is not gzip-compressed ({err}); if it is plain text, drop the .gz ending")
    if isinstance(err, EOFError):
        return DataError(f"{path} is truncated (the compressed data ends early); copy it again")
    if isinstance(err, (gzip.BadGzipFile, zlib.error)):  # a bad CRC or length, a damaged stream
        return DataError(f"{path} is damaged ({err}); copy it again")
    return DataError(f"cannot read {path}: {err.strerror or err}")


class _CheckedReader(io.BufferedIOBase):
    """A binary file whose every read turns a damaged or truncated file into ``read_failure``.

    gzip reports damage only when the damaged part is read, as BadGzipFile, EOFError or
    zlib.error: every reader of a file (lines, blocks, iteration) goes through here instead of
    catching those itself.
    """

    # try/except in each method, not a shared context manager: readline runs once per corpus line.
    def __init__(self, raw: BinaryIO, path: Path) -> None:
        super().__init__()
        self.raw, self.path = raw, path

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        try:
            return self.raw.read(size)
        except (OSError, EOFError, zlib.error) as err:
            raise read_failure(self.path, err) from None

    def read1(self, size: int = -1) -> bytes:
        try:
            return self.raw.read1(size)  # type: ignore[attr-defined]
        except (OSError, EOFError, zlib.error) as err:
            raise read_failure(self.path, err) from None

    def readline(self, size: int | None = -1) -> bytes:
        try:
            return self.raw.readline(size)
        except (OSError, EOFError, zlib.error) as err:
            raise read_failure(self.path, err) from None

    def close(self) -> None:
        self.raw.close()
        super().close()


def open_bytes(path: Path) -> BinaryIO:
    """``path`` for reading bytes, decompressed if its name ends in .gz; DataError if it cannot be
    opened or read (``read_failure``), at whatever point the damage is met."""
    check_readable_file(path)
    try:
        raw = gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        raise DataError(f"{path} does not exist") from None
    except OSError as err:
        raise read_failure(path, err) from None
    return _CheckedReader(raw, path)  # type: ignore[return-value]


def read_lines(path: str | Path) -> list[str]:
    """Lines of a UTF-8 text file (gzipped if it ends in .gz), only the line ending removed.

    Splits on "\\n" alone: ``str.splitlines`` also breaks at characters such as U+2028, which
    would silently shift one side of a parallel corpus against the other.
    """
    path = Path(path)
    with open_bytes(path) as handle:
        raw = handle.read()
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
    except DataError:
        return None
    return count + (last != b"\n")
