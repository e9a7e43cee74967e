"""``files.FileStore`` on its own and in-process: a server's directory is alive while its lock is
held, whatever process ids say (a server in another PID namespace shares ``$TMPDIR``), and a
translated file deleted by anything else is a 404, not a 500."""

from __future__ import annotations

import asyncio
import fcntl
import os
import tempfile
from pathlib import Path

import httpx
import pytest
from helpers import UpperEngine, in_process

from mt_cli.documents.filetypes import FileFormat
from mt_cli.serve.app import Settings, create_app
from mt_cli.serve.errors import ApiError
from mt_cli.serve.files import LOCK, FileStore

NO_SUCH_PID = 4_194_305  # above Linux's largest pid (2**22): no process here has it


@pytest.fixture
def temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # $TMPDIR, as the stores see it
    return tmp_path


def server_folder(root: Path, name: str, locked: bool) -> tuple[Path, int | None]:
    """A folder as a server makes it, with its lock held (by a descriptor returned) or left free."""
    folder = root / f"mt-serve-files-{name}"
    folder.mkdir()
    (folder / "abc.talk_en.srt").write_bytes(b"1\n")
    handle = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    if not locked:
        os.close(handle)
        return folder, None
    fcntl.flock(handle, fcntl.LOCK_EX)
    return folder, handle


def test_a_live_servers_folder_is_kept_whatever_its_pid_and_a_dead_ones_removed(temporary: Path) -> None:
    # Another PID namespace: a live server whose id means nothing here (a dead one's, to this
    # process). The old check by process id removed its folder; the lock keeps it.
    foreign, held = server_folder(temporary, f"{NO_SUCH_PID}-live", locked=True)
    dead, _ = server_folder(temporary, f"{os.getpid()}-dead", locked=False)  # a live pid, no holder
    unlocked = temporary / "mt-serve-files-1-older"  # no lock: being made, or by an older mt
    unlocked.mkdir()

    async def scenario() -> tuple[set[str], set[str]]:
        first, second = FileStore(60.0), FileStore(60.0)
        await first.start()
        await second.start()  # its sweep must keep the first's folder, which is alive
        during = {path.name for path in temporary.iterdir()}
        await first.close()
        await second.close()
        return during, {path.name for path in temporary.iterdir()}

    try:
        during, after = asyncio.run(scenario())
    finally:
        assert held is not None
        os.close(held)
    assert foreign.name in during and unlocked.name in during and dead.name not in during
    assert len(during) == 4  # the two kept and the two stores' own
    assert after == {foreign.name, unlocked.name}  # each store removes its own folder on close


def test_a_store_killed_without_closing_leaves_a_folder_the_next_one_removes(temporary: Path) -> None:
    async def scenario() -> tuple[Path, list[Path]]:
        killed = FileStore(60.0)
        await killed.start()
        assert killed.directory is not None and killed._lock is not None
        os.close(killed._lock)  # what SIGKILL does: the kernel drops the lock, the folder stays
        following = FileStore(60.0)
        await following.start()
        left = sorted(temporary.iterdir())
        await following.close()
        return killed.directory, left

    killed, left = asyncio.run(scenario())
    assert killed not in left and len(left) == 1


def test_a_file_deleted_by_something_else_is_a_404() -> None:
    async def scenario() -> None:
        store = FileStore(60.0)
        await store.start()
        try:
            name = store.put(b"Hund.", "a_en.txt", FileFormat.TEXT)
            assert store.directory is not None
            (store.directory / name).unlink()  # a $TMPDIR cleaner, say
            with pytest.raises(ApiError) as gone:
                store.take(name)
            assert gone.value.status == 404 and "was deleted from the server's folder" in gone.value.message
            assert store.take(name) is None  # and it is no longer listed
        finally:
            await store.close()

    asyncio.run(scenario())


def test_the_download_of_a_deleted_file_answers_404_json(temporary: Path) -> None:
    app = create_app(UpperEngine(), Settings())

    async def scenario(http: httpx.AsyncClient) -> tuple[httpx.Response, httpx.Response]:
        posted = await http.post(
            "/translate_file", data={"source": "de", "target": "en"}, files={"file": ("a.txt", b"Ein Hund.")}
        )
        url = posted.json()["translatedFileUrl"]
        for path in app.state.files.directory.iterdir():
            if path.name != LOCK:
                path.unlink()
        return posted, await http.get(url)

    posted, download = asyncio.run(in_process(app, scenario))
    assert posted.status_code == 200
    assert download.status_code == 404 and download.headers["content-type"] == "application/json"
    message = download.json()["error"]
    assert "was deleted from the server's folder; translate it again" in message and "\n" not in message
