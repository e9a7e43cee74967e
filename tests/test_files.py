"""files.py: atomic outputs, UTF-8 line reading and streaming, early path checks."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from mt_cli.errors import DataError, InputError
from mt_cli.files import (
    AtomicTextOutput,
    batched,
    check_input_file,
    check_output_path,
    count_lines,
    read_lines,
    stream_file_lines,
    stream_lines,
    write_json,
)


def test_atomic_output_appears_only_when_committed(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("earlier\n", encoding="utf-8")
    output = AtomicTextOutput(target)
    output.write("new line\n")
    output.flush()
    assert target.read_text(encoding="utf-8") == "earlier\n"  # nothing visible while it is written
    output.commit()
    output.discard()  # after commit: a no-op
    assert target.read_text(encoding="utf-8") == "new line\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_discarded_output_keeps_the_earlier_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("earlier\n", encoding="utf-8")
    output = AtomicTextOutput(target)
    output.write("half of it")
    output.discard()
    assert target.read_text(encoding="utf-8") == "earlier\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_output_paths_are_checked(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="directory .*missing does not exist"):
        check_output_path(tmp_path / "missing" / "out.txt", "--output")
    with pytest.raises(InputError, match="is a directory"):
        check_output_path(tmp_path, "--output")
    with pytest.raises(InputError, match="is a directory"):
        AtomicTextOutput(tmp_path)
    check_output_path(tmp_path / "fine.txt", "--output")
    check_output_path(Path("relative-name.txt"), "--output")  # the working directory
    with pytest.raises(InputError, match="does not exist"):
        check_input_file(tmp_path / "nope.txt", "--input")
    with pytest.raises(InputError, match="is a directory"):
        check_input_file(tmp_path, "--input")


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
    with pytest.raises(InputError, match="cannot read .*in.de.gz after line"):
        list(stream_file_lines(path))
    assert count_lines(path) is None  # the reading itself says why


def test_batched_hands_on_full_chunks_then_the_rest() -> None:
    assert list(batched(iter("abcdefg"), 3)) == [["a", "b", "c"], ["d", "e", "f"], ["g"]]
    assert list(batched(iter([]), 3)) == []


def test_write_json_is_utf8_and_atomic(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "report.json"
    write_json({"text": "Grüße"}, path)
    assert path.read_text(encoding="utf-8") == '{\n  "text": "Grüße"\n}\n'
