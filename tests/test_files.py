"""files.py: atomic outputs, UTF-8 line reading and streaming, early path checks."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
from pathlib import Path

import pytest

from mt_cli.errors import DataError, InputError, RunFailure
from mt_cli.files import (
    AtomicTextOutput,
    batched,
    check_input_file,
    check_output_path,
    count_lines,
    open_bytes,
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


# A child process whose files may grow to 1,000 bytes (a full disk, for anyone who runs the suite).
FULL_DISK = """
import resource, sys
from pathlib import Path
from mt_cli.errors import RunFailure
from mt_cli.files import AtomicTextOutput, atomic_write_bytes
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
target = Path(sys.argv[1])

def like_torch_save(handle):
    try:
        handle.write(bytes(5000))
    except OSError:  # torch.save hides the cause in its own error
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")

for write in (like_torch_save, lambda handle: handle.write(bytes(5000))):
    try:
        atomic_write_bytes(target, write)
    except RunFailure as err:
        print(err)
output = AtomicTextOutput(target)
try:
    output.write("x" * 5000)
    output.commit()
except RunFailure as err:
    print(err)
finally:
    output.discard()
"""


def test_a_write_that_fails_midway_is_a_run_failure_and_keeps_the_earlier_file(tmp_path: Path) -> None:
    target = tmp_path / "last.pt"
    target.write_bytes(b"earlier")
    child = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(target)], capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 0, child.stderr
    too_large = "the file grew too large for the file system or this process's limit (ulimit -f)"
    assert (
        child.stdout.splitlines() == [f"cannot write {target}: {too_large}, then run the command again"] * 3
    )
    assert target.read_bytes() == b"earlier" and [p.name for p in tmp_path.iterdir()] == ["last.pt"]


def test_writes_into_a_place_nobody_may_write_are_one_line(tmp_path: Path) -> None:
    # /sys takes no new files, not even from root (for whom a permission check passes)
    with pytest.raises(InputError, match="--output /sys/out.txt: directory /sys is not writable"):
        check_output_path(Path("/sys/out.txt"), "--output")
    with pytest.raises(RunFailure, match="cannot write /sys/mt-test/x.json: "):
        write_json({}, Path("/sys/mt-test/x.json"))
    check_output_path(tmp_path / "fine.txt", "--output")
    assert list(tmp_path.iterdir()) == []  # the check leaves nothing behind


def test_batched_hands_on_full_chunks_then_the_rest() -> None:
    assert list(batched(iter("abcdefg"), 3)) == [["a", "b", "c"], ["d", "e", "f"], ["g"]]
    assert list(batched(iter([]), 3)) == []


def test_write_json_is_utf8_and_atomic(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "report.json"
    write_json({"text": "Grüße"}, path)
    assert path.read_text(encoding="utf-8") == '{\n  "text": "Grüße"\n}\n'
