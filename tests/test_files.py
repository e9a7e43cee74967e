"""files.py: atomic outputs, failed writes as one line, early path checks."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mt_cli.disk.files import (
    AtomicTextOutput,
    atomic_write_bytes,
    check_output_path,
    write_json,
    written_in_place,
)
from mt_cli.disk.reading import check_input_file
from mt_cli.errors import InputError, RunFailure


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


# A child process whose files may grow to 1,000 bytes (a full disk, for anyone who runs the suite).
FULL_DISK = """
import resource, sys
from pathlib import Path
from mt_cli.errors import RunFailure
from mt_cli.disk.files import AtomicTextOutput, atomic_write_bytes
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


def test_write_json_is_utf8_and_atomic(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "report.json"
    write_json({"text": "Grüße"}, path)
    assert path.read_text(encoding="utf-8") == '{\n  "text": "Grüße"\n}\n'


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_both_writers_give_new_files_the_umask_and_keep_a_replaced_files_mode(
    tmp_path: Path, umask: int
) -> None:
    """mkstemp makes its file 0600; what lands at the target is what a shell's `>` would give."""

    def text(path: Path) -> None:
        output = AtomicTextOutput(path)
        output.write("line\n")
        output.commit()

    def binary(path: Path) -> None:
        atomic_write_bytes(path, lambda handle: handle.write(b"bytes"))

    previous = os.umask(umask)
    try:
        for write in (text, binary):
            new, kept = tmp_path / f"new-{write.__name__}", tmp_path / f"kept-{write.__name__}"
            kept.write_bytes(b"earlier")
            kept.chmod(0o640)
            write(new)
            write(kept)
            assert (new.stat().st_mode & 0o777, kept.stat().st_mode & 0o777) == (0o666 & ~umask, 0o640)
    finally:
        os.umask(previous)


def _read_fifo(fifo: Path, into: list[bytes]) -> threading.Thread:
    """A reader of ``fifo`` in a thread (a FIFO's writer blocks until one opens it)."""

    def read() -> None:
        with open(fifo, "rb") as handle:
            into.append(handle.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


def test_a_special_file_is_written_in_place_and_stays_what_it_was(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert written_in_place(fifo) and written_in_place(Path("/dev/null"))
    assert not written_in_place(tmp_path / "new.txt")
    for write in (
        lambda: atomic_write_bytes(fifo, lambda handle: handle.write(b"bytes\n")),
        lambda: _write_lines(AtomicTextOutput(fifo), ["one\n", "two\n"]),
    ):
        received: list[bytes] = []
        reader = _read_fifo(fifo, received)
        write()
        reader.join(timeout=10)
        assert received and received[0] in (b"bytes\n", b"one\ntwo\n")
        assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still a FIFO, not a regular file
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]  # no temporary left beside it


def _write_lines(output: AtomicTextOutput, lines: list[str]) -> None:
    for line in lines:
        output.write(line)
    output.commit()


def test_a_write_through_a_link_replaces_its_target_and_the_link_stays(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "scores.json"
    target.write_text("earlier\n", encoding="utf-8")
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    write_json({"bleu": 1.5}, link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text(encoding="utf-8") == '{\n  "bleu": 1.5\n}\n'
    dangling = tmp_path / "later.txt"
    dangling.symlink_to(tmp_path / "real" / "made.txt")  # `>` makes a dangling link's target
    output = AtomicTextOutput(dangling)
    output.write("made\n")
    output.commit()
    assert dangling.is_symlink() and (tmp_path / "real" / "made.txt").read_text(encoding="utf-8") == "made\n"
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["made.txt", "scores.json"]


def test_a_link_into_a_missing_directory_is_refused_before_the_work(tmp_path: Path) -> None:
    link = tmp_path / "out.txt"
    link.symlink_to(tmp_path / "gone" / "out.txt")
    with pytest.raises(InputError, match="directory .*gone does not exist"):
        check_output_path(link, "--output")
