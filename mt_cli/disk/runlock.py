"""One writer per run directory: a lock file that names the process holding it.

``mt train``, ``mt prepare``, ``mt average`` and ``mt export`` hold the run's lock file
(``layout.RunDir.lock``) while they write into the run; a second one is refused at once with the
holder's pid, host and command. The lock is ``fcntl.flock`` on the open file, so the kernel
releases it however the holder ends (even SIGKILL or a power cut): a lock file left behind by a
dead process is not stale in any way that matters, the next writer simply locks it again and
writes its own name into it. The lock is advisory (only mt asks for it) and, on network file
systems without lock support, fails with a one-line error rather than being silently ignored.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from mt_cli.errors import CheckpointError, InputError


def make_run_directory(root: Path) -> bool:
    """Create ``root`` (and its parents) if need be; True if this call made it.

    Only the process that made a directory may remove it again: another process may be
    working in one that already existed.
    """
    try:
        root.mkdir(parents=True)
    except FileExistsError:
        if not root.is_dir():
            raise InputError(f"run directory {root} is a file; give a directory for --run") from None
        return False
    except OSError as err:
        raise InputError(
            f"cannot create run directory {root} ({err.strerror or err}); give a --run in a writable place"
        ) from None
    return True


def writes_into(root: Path, output: Path) -> bool:
    """Whether ``output`` lies inside the run directory ``root`` (then its writer takes the lock)."""
    return output.resolve().is_relative_to(root.resolve())


def read_holder(path: Path) -> dict[str, Any]:
    """What the lock file says about its holder (empty if it says nothing readable)."""
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def describe(holder: dict[str, Any]) -> str:
    """E.g. "`mt train` (pid 4242 on gpu-01, since 2025-01-31 12:00:00)"."""
    if "pid" not in holder:
        return "another mt process (it has not written its name yet)"
    since = f", since {holder['since']}" if "since" in holder else ""
    return f"`mt {holder.get('command', '?')}` (pid {holder['pid']} on {holder.get('host', '?')}{since})"


class RunLock:
    """The exclusive lock on ``path`` (a run's lock file) for ``command``; use it with ``with``.

    Released on leaving the block, or by the kernel when the process dies. The file is removed
    on release while still locked; whoever locked the removed file meanwhile sees that it is no
    longer the one at ``path`` and tries again, so two processes never both hold the lock.
    """

    def __init__(self, path: Path, command: str) -> None:
        self.path, self.command = path, command
        self.fd: int | None = None

    def acquire(self) -> RunLock:
        """Take the lock, or raise CheckpointError naming the process that holds it."""
        while self.fd is None:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise CheckpointError(
                    f"run directory {self.path.parent} is in use by {describe(read_holder(self.path))}; "
                    "wait for it to finish, or use another --run"
                ) from None
            except OSError as err:
                os.close(fd)
                raise InputError(
                    f"cannot lock {self.path} ({err.strerror or err}); the file system does not support "
                    "locks: use a --run on a local disk"
                ) from None
            try:
                current = os.stat(self.path)
            except FileNotFoundError:
                current = None
            if current is not None and os.path.samestat(os.fstat(fd), current):
                self.fd = fd
            else:  # its holder released and removed it between our open and flock: open it anew
                os.close(fd)
        self._write_holder()
        return self

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as err:
            raise InputError(
                f"cannot write in run directory {self.path.parent} ({err.strerror or err}); "
                "give a --run in a writable place"
            ) from None

    def _write_holder(self) -> None:
        """Our name in the file, for the message of whoever is refused next."""
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": self.command,
            "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        data = (json.dumps(holder) + "\n").encode("utf-8")
        try:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, data, 0)
        except OSError as err:
            self.release()
            raise InputError(
                f"cannot write in run directory {self.path.parent} ({err.strerror or err}); "
                "give a --run in a writable place"
            ) from None

    def release(self) -> None:
        """Remove the file and drop the lock (nothing if not held)."""
        if self.fd is None:
            return
        try:
            os.unlink(self.path)  # while still locked: see the class docstring
        except OSError:
            pass  # a lock file left behind is harmless: the next writer locks it again
        os.close(self.fd)
        self.fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.release()
