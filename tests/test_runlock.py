"""runlock.py: one writer per run directory, named when it refuses another; a dead holder's
lock is taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mt_cli.disk.runlock import RunLock, make_run_directory, read_holder, writes_into
from mt_cli.errors import CheckpointError, InputError

# A process that takes the lock, says so, and waits for its stdin to close; then it dies without
# releasing anything (os._exit), as a killed or crashed `mt train` would.
HOLDER = """
import os, sys
from pathlib import Path
from mt_cli.disk.runlock import RunLock
RunLock(Path(sys.argv[1]), "train").acquire()
print("locked", flush=True)
sys.stdin.read()
os._exit(0)
"""


def test_the_lock_file_names_its_holder_while_held_and_goes_when_released(tmp_path: Path) -> None:
    path = tmp_path / ".lock"
    with RunLock(path, "average"):
        holder = read_holder(path)
        assert (holder["pid"], holder["host"]) == (os.getpid(), socket.gethostname())
        assert holder["command"] == "average"
        with pytest.raises(CheckpointError) as refused:  # another open file: flock refuses it too
            RunLock(path, "train").acquire()
        assert f"is in use by `mt average` (pid {os.getpid()} on {socket.gethostname()}" in str(refused.value)
    assert not path.exists()
    with RunLock(path, "train"):  # free again
        assert read_holder(path)["command"] == "train"


def test_a_second_process_is_refused_and_a_dead_holders_lock_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / ".lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(CheckpointError, match=rf"in use by `mt train` \(pid {holder.pid} on "):
            RunLock(path, "prepare").acquire()
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    # The holder died holding the lock: its file is still there and names it, but the kernel freed the lock.
    assert read_holder(path)["pid"] == holder.pid
    with RunLock(path, "prepare"):
        assert read_holder(path)["pid"] == os.getpid()
    assert not path.exists()


def test_a_lock_file_someone_wrote_by_hand_does_not_block(tmp_path: Path) -> None:
    path = tmp_path / ".lock"
    stale = {"pid": 999_999_999, "host": "elsewhere", "command": "train"}
    path.write_text(json.dumps(stale), encoding="utf-8")
    with RunLock(path, "export"):
        assert read_holder(path)["command"] == "export"


def test_run_directories_are_made_once_and_unwritable_places_are_one_line(tmp_path: Path) -> None:
    assert make_run_directory(tmp_path / "runs" / "a") is True
    assert make_run_directory(tmp_path / "runs" / "a") is False  # existed: not ours to remove
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match="is a file; give a directory"):
        make_run_directory(tmp_path / "file")
    with pytest.raises(InputError, match="cannot create run directory .*file/run"):
        make_run_directory(tmp_path / "file" / "run")
    # /sys takes no new entries, even from root: a place nobody can write
    with pytest.raises(InputError, match="cannot create run directory /sys/mt-run"):
        make_run_directory(Path("/sys/mt-run"))
    with pytest.raises(InputError, match="cannot write in run directory /sys"):
        RunLock(Path("/sys/.mt-lock"), "train").acquire()


def test_writes_into(tmp_path: Path) -> None:
    assert writes_into(tmp_path, tmp_path / "exports" / "ct2")
    assert not writes_into(tmp_path / "run", tmp_path / "elsewhere")
