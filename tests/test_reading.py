"""reading.py: UTF-8 lines split on "\\n" alone, streamed as they arrive, and every damaged,
truncated or missing file as one line naming it."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from mt_cli.disk.reading import batched, count_lines, open_bytes, read_lines, stream_file_lines, stream_lines
from mt_cli.errors import DataError, InputError


def test_read_lines_splits_on_newline_only(tmp_path: Path) -> None:
    path = tmp_path / "a.txt.gz"
    with gzip.open(path, "wb") as handle:
        handle.write("\ufeffeins\r\nzwei\u2028halb\n\ndrei".encode())
    assert read_lines(path) == ["eins", "zwei\u2028halb", "", "drei"]
    assert count_lines(path) == 4
    with pytest.raises(DataError, match="is a directory"):
        read_lines(tmp_path)
    with pytest.raises(DataError, match="does not exist"):
        read_lines(tmp_path / "nope")


def test_stream_lines_yields_each_line_as_it_arrives_and_names_a_bad_one() -> None:
    stream = io.BytesIO("\ufeffEin Hund\r\n\n🐶 ✨\nGr".encode() + b"\xfc\xdfe\n")
    lines = stream_lines(stream, "standard input")
    assert [next(lines), next(lines), next(lines)] == ["Ein Hund", "", "🐶 ✨"]
    with pytest.raises(InputError, match=r"standard input is not UTF-8 \(line 4\)"):
        next(lines)


def test_stream_file_lines_reads_gzip_and_reports_a_truncated_file(tmp_path: Path) -> None:
    path = tmp_path / "in.de.gz"
    path.write_bytes(gzip.compress(("Zeile\n" * 1000).encode()))
    assert list(stream_file_lines(path)) == ["Zeile"] * 1000
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(DataError, match=r"in.de.gz is truncated \(the compressed data ends early\)"):
        list(stream_file_lines(path))
    assert count_lines(path) is None  # the reading itself says why


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda data: data[: len(data) // 2],
            r"is truncated \(the compressed data ends early\); copy it again",
        ),
        (lambda data: data[:-8] + bytes(4) + data[-4:], r"is damaged \(CRC check failed .*\); copy it again"),
        (lambda data: data[:10] + bytes(64) + data[74:], r"is damaged \(.*\); copy it again"),
        (gzip.decompress, r"is not gzip-compressed \(.*\); if it is plain text, drop the .gz ending"),
    ],
)
def test_every_reader_of_a_damaged_gzip_file_says_which_file(tmp_path: Path, damage, message: str) -> None:
    path = tmp_path / "train.de.gz"
    path.write_bytes(damage(gzip.compress("".join(f"Zeile {i}\n" for i in range(5000)).encode())))
    for read in (read_lines, lambda p: list(stream_file_lines(p)), lambda p: list(open_bytes(p))):
        with pytest.raises(DataError, match=f"^{tmp_path}/train.de.gz {message}$"):
            read(path)
    assert count_lines(path) is None


def test_batched_hands_on_full_chunks_then_the_rest() -> None:
    assert list(batched(iter("abcdefg"), 3)) == [["a", "b", "c"], ["d", "e", "f"], ["g"]]
    assert list(batched(iter([]), 3)) == []
