"""LibreTranslate's file translation: ``POST /translate_file`` and ``GET /download_file/<name>``.

A client posts a multipart form: ``file`` (a .txt, .html, .htm, .srt, .docx, .pptx, .odt, .odp or
.epub file, read by the ``documents`` wing by its extension), ``source`` (or ``auto``: the language
of the file's text is detected, as for /translate, and its sentences split by that language's
rules), ``target`` and ``api_key`` (checked as for /translate). The answer is LibreTranslate's
``{"translatedFileUrl": "<server>/download_file/<name>"}``, where ``name`` is a random hex id, a
period and the download's name: the upload's name (reduced to ASCII letters, digits, ``_``, ``-``
and ``.``) with ``_<target>`` before its extension, as argos-translate-files names a translation.
The first GET of that URL answers the file as an attachment of that name and removes it; the second
is a 404.

Refusals, each ``{"error": ...}`` in one line: 403 when ``--max-file-size 0`` turns files off
(``/frontend/settings`` then says ``"filesTranslation": false``); 413 for a file over
``--max-file-size`` bytes (or a body over it plus ``FORM_OVERHEAD``); 400 for a missing field,
another extension, or a file that is not what its extension says (not UTF-8, not SubRip, not a Word
package, a hostile zip); 429 and 503 as for /translate. A file's sentences are decoded by the
batcher in pieces of at most ``--max-request-lines``, one after the other, so a long file never
holds the whole queue.

``FileStore`` owns the translated files: a temporary directory made at startup and removed at
shutdown; a file is written there (under a temporary name, then renamed) only once its
translation is complete, removed when downloaded or ``--file-ttl`` seconds after it was made,
whichever is first. Nothing is written for a request that fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import shutil
import tempfile
import unicodedata
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePath
from typing import Any

from fastapi import Depends, FastAPI, Request, Response
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException

from mt_cli.config.options import TranslateOptions
from mt_cli.decode.engine import Engine
from mt_cli.documents.filetypes import EXTENSIONS, FileDocument, FileFormat, format_of, read_file
from mt_cli.errors import InputError
from mt_cli.serve.access import Access
from mt_cli.serve.errors import ApiError, show
from mt_cli.serve.job import Job, Translating
from mt_cli.serve.parse import check_encodable, parse_direction, parse_glossary

FORM_OVERHEAD = 16 << 10  # bytes of a form beyond its file: the other fields and the part headers
DISABLED = "Files translation are disabled on this server."  # LibreTranslate's words
SWEEP_S = 60.0  # seconds between two looks for files past their time
MEDIA_TYPES = {
    FileFormat.TEXT: "text/plain; charset=utf-8",
    FileFormat.HTML: "text/html; charset=utf-8",
    FileFormat.SRT: "application/x-subrip; charset=utf-8",
    FileFormat.DOCX: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    FileFormat.PPTX: "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    FileFormat.ODT: "application/vnd.oasis.opendocument.text",
    FileFormat.ODP: "application/vnd.oasis.opendocument.presentation",
    FileFormat.EPUB: "application/epub+zip",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class _Stored:
    path: Path
    download: str  # the name the client saves it as
    deadline: float  # the event loop's time at which it is removed
    form: FileFormat


_PREFIX = "mt-serve-files-"  # then the server's process id (for people), a dash and mkdtemp's part
LOCK = ".lock"  # in a server's directory, locked (flock) by that server for its whole life


def _remove_orphans(root: Path) -> None:
    """Remove the file directories that servers killed with SIGKILL left in ``root``: those whose
    lock no process holds. Never by process id: a server in another PID namespace (a container)
    sharing ``root`` has ids this one cannot see. A directory without a lock is being made, or
    was made by an mt before the locks, and stays."""
    for directory in root.glob(f"{_PREFIX}*"):
        try:
            handle = os.open(directory / LOCK, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:  # no lock (or another user's directory): not ours to judge
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # its server holds it: alive
            os.close(handle)
            continue
        try:  # taken: its server is gone, and no other sweep can take it while this one holds it
            shutil.rmtree(directory, ignore_errors=True)
        finally:
            os.close(handle)


def _make_locked(root: Path) -> tuple[Path, int]:
    """A new directory in ``root`` and its lock, held until the returned descriptor is closed.
    The lock is made under another name and renamed once locked, so a sweep never finds it free."""
    directory = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=root))
    making = directory / f"{LOCK}.making"
    handle = os.open(making, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else has it
        os.replace(making, directory / LOCK)
    except OSError:
        os.close(handle)
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return directory, handle


class FileStore:
    """The server's directory of translated files, each removed at its first download or its
    deadline; used on the event loop only, so no two requests race for one file."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.directory: Path | None = None
        self._lock: int | None = None  # the descriptor holding the directory's lock
        self._files: dict[str, _Stored] = {}
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Make the directory in ``$TMPDIR``, first removing the ones dead servers left there."""
        root = Path(tempfile.gettempdir())
        _remove_orphans(root)
        self.directory, self._lock = _make_locked(root)
        self._sweeper = asyncio.ensure_future(self._sweep_forever())

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
        if self._lock is not None:  # released last: until the directory is gone it is in use
            os.close(self._lock)
            self._lock = None
        self._files.clear()

    def put(self, data: bytes, download: str, form: FileFormat) -> str:
        """Store ``data``; the name to download it by. Written under a temporary name and
        renamed, so a failed write (a full disk: 503) leaves nothing."""
        if self.directory is None:
            raise RuntimeError("the file store is used before the server has started")
        name = f"{uuid.uuid4().hex}.{download}"
        path, partial = self.directory / name, self.directory / f".{name}.partial"
        try:
            partial.write_bytes(data)
            os.replace(partial, path)
        except OSError as err:
            partial.unlink(missing_ok=True)
            raise ApiError(503, f"cannot store the translated file: {err.strerror or err}") from None
        deadline = asyncio.get_running_loop().time() + self.ttl
        self._files[name] = _Stored(path, download, deadline, form)
        return name

    def take(self, name: str) -> tuple[bytes, _Stored] | None:
        """The file stored as ``name``, removed from the store; None if there is none (any
        other name, a path included, is unknown: only stored names are looked up). A 404 if
        something else (a cleaner of ``$TMPDIR``) deleted it."""
        stored = self._files.pop(name, None)
        if stored is None:
            return None
        try:
            return stored.path.read_bytes(), stored
        except FileNotFoundError:
            message = (
                f"the translated file {show(name)} was deleted from the server's folder; translate it again"
            )
            raise ApiError(404, message) from None
        finally:
            stored.path.unlink(missing_ok=True)

    def sweep(self) -> None:
        """Remove every file past its deadline."""
        now = asyncio.get_running_loop().time()
        for name in [name for name, stored in self._files.items() if stored.deadline <= now]:
            self._files.pop(name).path.unlink(missing_ok=True)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(min(SWEEP_S, self.ttl))
            self.sweep()


def download_name(upload: str, target: str) -> str:
    """``talk.srt`` -> ``talk_en.srt``: ASCII letters, digits, ``_``, ``-`` and ``.`` only."""
    path = PurePath(upload.replace("\\", "/"))
    return f"{_safe(path.stem)[:100] or 'file'}_{_safe(target)}{path.suffix.lower()}"


def _safe(text: str) -> str:
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return _UNSAFE.sub("_", plain).strip("._")


@dataclass(frozen=True)
class Upload:
    """A /translate_file body: the form's text fields, the file's name and its bytes."""

    fields: dict[str, Any]
    name: str
    data: bytes


async def read_upload(request: Request, content: bytes) -> Upload:
    """The form of a /translate_file body ``content``."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "multipart/form-data":
        raise ApiError(400, "invalid request: send the file as a multipart/form-data field named file")

    async def replay() -> dict[str, Any]:  # the body was already read (and measured)
        return {"type": "http.request", "body": content, "more_body": False}

    try:
        form = await Request(request.scope, replay).form(max_files=1)
    except HTTPException as err:  # Starlette's 400 for a malformed form, or a second file
        raise ApiError(400, f"invalid form body: {err.detail}") from None
    except MultiPartException as err:
        raise ApiError(400, f"invalid form body: {err.message}") from None
    try:
        fields = {name: value for name, value in form.multi_items() if isinstance(value, str)}
        check_encodable(fields)
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise ApiError(400, "invalid request: missing file parameter")
        return Upload(fields, upload.filename or "", await upload.read())
    finally:
        await form.close()  # an upload over 1 MiB was spooled to a temporary file


def add_routes(
    app: FastAPI,
    store: FileStore,
    engine: Engine,
    translating: Translating,
    read: Callable[[Request, int], Awaitable[bytes]],
    max_size: int,
    access: Access,
    server_options: TranslateOptions,
) -> None:
    """``POST /translate_file`` and ``GET /download_file/{name}`` on ``app``: ``read`` reads a
    body of at most the bytes it is given, ``max_size`` is the largest file (0: files off),
    ``access`` admits the caller by the form's fields, as for /translate."""

    async def upload_of(request: Request) -> Upload:
        if max_size == 0:  # before the body is read: off is off for every caller
            raise ApiError(403, DISABLED)
        return await read_upload(request, await read(request, max_size + FORM_OVERHEAD))

    async def fields_of(upload: Upload = Depends(upload_of)) -> dict[str, Any]:
        return upload.fields

    admit = access.admission(fields_of)

    @app.post("/translate_file", dependencies=[Depends(admit)])
    async def translate_file(request: Request, upload: Upload = Depends(upload_of)) -> dict[str, str]:
        fields, name, data = upload.fields, upload.name, upload.data
        source, target = parse_direction(fields, translating.scope)
        if name == "":
            raise ApiError(400, "invalid request: empty file")
        form = format_of(name)
        if form is None:
            known = ", ".join(EXTENSIONS)
            raise ApiError(400, f"invalid request: file format not supported ({show(name)}); send {known}")
        if len(data) > max_size:
            raise ApiError(413, f"the file ({len(data)} bytes) is over this server's {max_size} bytes")
        language = translating.scope.source if source == "auto" else source
        glossary, mode = parse_glossary(fields, language, target)
        try:  # checked before any work, as /translate does
            options = engine.resolve(replace(server_options, tgt_lang=target)).with_glossary(glossary, mode)
            if glossary is not None:
                engine.check_terms(options)
        except InputError as err:
            raise ApiError(400, f"invalid request: {err}") from None

        def read_as(languages: Sequence[str]) -> list[FileDocument]:
            return [read_file(data, form, languages[0], show(name))]

        job = Job(read_as, (language,), source == "auto", target, "file")
        done = await translating.run(job, options, request.receive)
        [document], [sentences] = done.documents, done.hypotheses
        translated = await asyncio.to_thread(document.rebuild, [decoded.texts[0] for decoded in sentences])
        stored = store.put(translated, download_name(name, target), form)
        return {"translatedFileUrl": f"{str(request.base_url).rstrip('/')}/download_file/{stored}"}

    @app.get("/download_file/{name}")
    async def download_file(name: str) -> Response:
        if max_size == 0:
            raise ApiError(403, DISABLED)
        found = store.take(name)
        if found is None:
            message = f"no translated file {show(name)}: it was downloaded, or removed after {store.ttl:g} s"
            raise ApiError(404, message)
        data, stored = found
        disposition = f'attachment; filename="{stored.download}"'
        return Response(
            data, media_type=MEDIA_TYPES[stored.form], headers={"Content-Disposition": disposition}
        )
