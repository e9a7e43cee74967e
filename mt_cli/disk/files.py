"""Writing files the way every command does: atomic writes, checked outputs, content digests.

Every write to a regular file goes to a temporary file in the target's directory and is renamed
into place, so a crash or Ctrl-C in the middle leaves the previous file (or none), never half of
one. A write lands where a shell's ``>`` would put it: through a symbolic link into the file it
names (the link stays a link), and into a special file (``/dev/null``, ``/dev/stdout``, a terminal,
a FIFO) in place, since renaming over a device would make it a regular file for the whole machine.
Outputs are checked before any work starts, so a typo in ``--output`` costs nothing. Reading is
``reading``'s.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

from mt_cli.errors import InputError, RunFailure

ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip member can carry: no clock in the bytes
NEW_FILE = 0o666  # what open() asks for a new file; the umask takes bits away (0644 under umask 022)
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


def _umask() -> int:
    """This process's umask, read without changing it where Linux says it (/proc/self/status)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (a moment in which another thread's files get 022)
    os.umask(mask)
    return mask


def final_mode(path: Path) -> int:
    """The permission bits a file written in place of ``path`` gets: those of the file it replaces,
    or, for a new file, what ``open`` gives one (0666 less the umask), as ``>`` in a shell does.
    mkstemp makes its temporary file private (0600); the files mt writes are shared results."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return NEW_FILE & ~_umask()


def written_in_place(path: Path) -> bool:
    """Whether a write to ``path`` goes into the file itself, as a shell's ``>`` does, rather than
    replacing it: a device, FIFO, socket or terminal, links followed (``/dev/stdout`` is a link)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:  # nothing there yet (or a dangling link): a new regular file
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def replaced_file(path: Path) -> Path:
    """The file a write to ``path`` replaces: the end of its chain of links (made if missing, as
    ``>`` makes a dangling link's target), so that the link itself survives the rename."""
    return Path(os.path.realpath(path))


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
    temporary file is removed and an earlier ``path`` stays as it was. A special file is written
    in place (``written_in_place``), a link's target replaced.
    """
    if written_in_place(path):
        with writing(path), open(path, "wb") as handle:
            _write_recorded(handle, write)
        return
    tmp = None
    target = replaced_file(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _temporary_next_to(target)
        with os.fdopen(fd, "wb") as handle:
            _write_recorded(handle, write)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, final_mode(target))
        os.replace(tmp, target)
    except OSError as err:
        raise write_failure(path, err) from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def _write_recorded(handle: BinaryIO, write: Callable[[BinaryIO], Any]) -> None:
    """``write(handle)``, raising the OSError of a failed write whatever the writer made of it."""
    recorded = _RecordedWrites(handle)
    try:
        write(recorded)  # type: ignore[arg-type]
    except Exception:
        if recorded.error is not None:  # the writer's own error would hide that the write failed
            raise recorded.error from None
        raise


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
    """InputError unless ``path`` can be written as a file: a special file this process may write,
    or a name (a link's target) whose directory exists and takes new files; no directory."""
    if path.is_dir():
        raise InputError(f"{option} {path} is a directory; give a file name")
    if written_in_place(path):
        if not os.access(path, os.W_OK):
            raise InputError(f"{option} {path} is not writable (permission denied); write elsewhere")
        return
    parent = replaced_file(path).parent
    if not parent.is_dir():
        raise InputError(f"{option} {path}: directory {parent} does not exist; create it first")
    reason = unwritable(parent)
    if reason is not None:
        raise InputError(f"{option} {path}: directory {parent} is not writable ({reason}); write elsewhere")


def unwritable(directory: Path) -> str | None:
    """Why no file can be made in ``directory`` (an existing one), or None if one can.

    access() says yes to root even where nothing can be made (a read-only mount, /sys): try it.
    """
    try:
        with tempfile.TemporaryFile(dir=directory):
            return None
    except OSError as err:
        return err.strerror or str(err)


class AtomicTextOutput:
    """A text file written line by line under a temporary name and renamed into place by ``commit``.

    Opened before the work, so an unwritable path fails first; if the work fails or is
    interrupted, ``discard`` removes the temporary file and an existing file at ``path`` is kept.
    A special file (``/dev/stdout``, a FIFO) is written in place, line by line, with nothing to
    rename or take back; a link's target is the file replaced.
    """

    def __init__(self, path: Path, option: str = "--output") -> None:
        check_output_path(path, option)
        self.path = path
        self.tmp: str | None = None
        with writing(path):
            if written_in_place(path):
                self.handle: IO[str] = open(path, "w", encoding="utf-8", newline="\n")  # noqa: SIM115
                return
            self.target = replaced_file(path)
            fd, self.tmp = _temporary_next_to(self.target)
        self.handle = os.fdopen(fd, "w", encoding="utf-8", newline="\n")

    def write(self, text: str) -> None:
        with writing(self.path):
            self.handle.write(text)

    def flush(self) -> None:
        with writing(self.path):
            self.handle.flush()

    def commit(self) -> None:
        with writing(self.path):
            if self.tmp is None:  # written in place: nothing to make durable or rename
                self.handle.close()
                return
            self.handle.flush()
            os.fsync(self.handle.fileno())
            self.handle.close()
            os.chmod(self.tmp, final_mode(self.target))
            os.replace(self.tmp, self.target)

    def discard(self) -> None:
        if not self.handle.closed:
            # Closing flushes what is buffered; after a failed write that fails again, and the
            # file is removed anyway (the handle is closed all the same).
            with contextlib.suppress(OSError):
                self.handle.close()
        if self.tmp is not None and os.path.exists(self.tmp):
            os.unlink(self.tmp)
