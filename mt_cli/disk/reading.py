"""Reading text files the way every command does: early checks, UTF-8 lines, one-line errors.

Every reader of a corpus, a list of sentences or a checkpoint's side files opens it here, so a
missing file, a directory where a file belongs, a damaged or truncated gzip and text that is not
UTF-8 each end as one line naming the file (``DataError`` or ``InputError``), never a traceback.
UTF-16 text is refused so too (``utf16_refusal``), with or without a byte-order mark: without
one, text in the Latin script is valid UTF-8 with a NUL byte after each letter, and would be
translated as garbage.
Lines split on "\\n" alone, and a line is yielded as soon as it is read, so a person typing at a
terminal gets an answer per line. Writing is ``files``'s.
"""

from __future__ import annotations

import gzip
import io
import itertools
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from mt_cli.errors import DataError, InputError, MtError

UTF16_SAMPLE = 4096  # bytes of a text looked at for UTF-16
UTF16_NULS = 16  # UTF-16 without a mark: NULs in one byte of at least 1 in 16 two-byte units (spaces do)
_UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")  # little- and big-endian
_CONVERT = ", not UTF-8; convert it, e.g. with iconv -f {} -t UTF-8"


def utf16_refusal(data: bytes, name: str, offset: int = 0) -> str | None:
    """The one-line message refusing ``data`` (a file's start, or a line of it starting at byte
    ``offset``) as UTF-16 text, or None if it does not look like UTF-16.

    With a byte-order mark it is UTF-16; without one, its NUL bytes give it away: at least one in
    ``UTF16_NULS`` two-byte units (Latin letters have one each; other scripts' texts their
    spaces and line ends) and all of them in the same byte of their unit, never in the other.
    UTF-8 text has no NUL byte to speak of."""
    if offset == 0 and data[:2] in _UTF16_MARKS:
        return f"{name} is UTF-16 (it starts with a byte-order mark)" + _CONVERT.format("UTF-16")
    sample = data[:UTF16_SAMPLE]
    first, second = sample[0::2].count(0), sample[1::2].count(0)
    if offset % 2:
        first, second = second, first
    nuls = max(first, second)
    if nuls < 2 or min(first, second) or nuls * UTF16_NULS < len(sample) // 2:
        return None
    order = "UTF-16BE" if first else "UTF-16LE"  # big-endian: the NUL before its letter
    return f"{name} is UTF-16 without a byte-order mark ({order})" + _CONVERT.format(order)


def check_input_file(path: Path, option: str) -> None:
    """InputError unless ``path`` is an existing regular file."""
    if path.is_dir():
        raise InputError(f"{option} {path} is a directory; give a file")
    if not path.exists():
        raise InputError(f"{option} {path} does not exist")


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
        return text_lines(utf8_text(handle.read(), str(path), DataError))


def utf8_text(data: bytes, name: str, error: type[MtError]) -> str:
    """``data`` decoded as UTF-8, or ``error`` naming ``name`` in one line: UTF-16 (which, in
    Latin script, would decode as garbage) or bytes that are not UTF-8, with the line."""
    if refusal := utf16_refusal(data, name):
        raise error(refusal)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise error(f"{name} is not UTF-8 (line {line}); convert it, e.g. with iconv -t UTF-8") from None


def text_lines(text: str) -> list[str]:
    """Lines of ``text``, split on "\\n" alone (a BOM and CR line endings are dropped)."""
    lines = text.removeprefix("\ufeff").split("\n")
    if lines[-1] == "":  # the final newline ends the last line; it does not start a new one
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def stream_lines(stream: BinaryIO, name: str) -> Iterator[str]:
    """Lines of a binary stream as they arrive (for stdin and big files), decoded as UTF-8.

    Yields each line as soon as its newline is read, so a person typing at a terminal gets an
    answer per line; a line that is not UTF-8 is an InputError naming its number, and UTF-16
    (``utf16_refusal``) one saying so, at the first line that shows it.
    """
    number = offset = 0
    while True:
        try:
            raw = stream.readline()
        except (OSError, EOFError, zlib.error) as err:
            raise InputError(f"cannot read {name} after line {number}: {err}") from None
        if not raw:
            return
        number += 1
        if (offset == 0 or b"\0" in raw) and (refusal := utf16_refusal(raw, name, offset)):
            raise InputError(refusal)
        offset += len(raw)
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
