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

from fastapi import FastAPI, Request, Response
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException

from mt_cli.config.options import TranslateOptions
from mt_cli.decode.engine import Engine
from mt_cli.documents.filetypes import EXTENSIONS, FileDocument, FileFormat, format_of, read_file
from mt_cli.errors import InputError
from mt_cli.serve.errors import ApiError, show
from mt_cli.serve.job import Job, Translating
from mt_cli.serve.parse import check_encodable, check_key, parse_direction

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


_PREFIX = "mt-serve-files-"  # then the server's process id, a dash and mkdtemp's random part


def _remove_orphans(root: Path) -> None:
    """Remove the file directories that servers killed with SIGKILL left in ``root``: those whose
    process no longer exists (a live one's, or a reused id's, stay)."""
    for directory in root.glob(f"{_PREFIX}*-*"):
        pid = directory.name[len(_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and directory.is_dir() and not _alive(int(pid)):
            shutil.rmtree(directory, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's process
        pass
    return True


class FileStore:
    """The server's directory of translated files, each removed at its first download or its
    deadline; used on the event loop only, so no two requests race for one file."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.directory: Path | None = None
        self._files: dict[str, _Stored] = {}
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        root = Path(tempfile.gettempdir())
        _remove_orphans(root)
        self.directory = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=root))
        self._sweeper = asyncio.ensure_future(self._sweep_forever())

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
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
        other name, a path included, is unknown: only stored names are looked up)."""
        stored = self._files.pop(name, None)
        if stored is None:
            return None
        try:
            return stored.path.read_bytes(), stored
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


async def read_upload(request: Request, content: bytes) -> tuple[dict[str, Any], str, bytes]:
    """(the form's text fields, the file's name, its bytes) of a /translate_file body."""
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
        return fields, upload.filename or "", await upload.read()
    finally:
        await form.close()  # an upload over 1 MiB was spooled to a temporary file


def add_routes(
    app: FastAPI,
    store: FileStore,
    engine: Engine,
    translating: Translating,
    read: Callable[[Request, int], Awaitable[bytes]],
    max_size: int,
    keys: frozenset[str],
    server_options: TranslateOptions,
) -> None:
    """``POST /translate_file`` and ``GET /download_file/{name}`` on ``app``: ``read`` reads a
    body of at most the bytes it is given, ``max_size`` is the largest file (0: files off)."""

    @app.post("/translate_file")
    async def translate_file(request: Request) -> dict[str, str]:
        if max_size == 0:
            raise ApiError(403, DISABLED)
        fields, name, data = await read_upload(request, await read(request, max_size + FORM_OVERHEAD))
        check_key(fields, keys)
        source, target = parse_direction(fields, translating.scope)
        if name == "":
            raise ApiError(400, "invalid request: empty file")
        form = format_of(name)
        if form is None:
            known = ", ".join(EXTENSIONS)
            raise ApiError(400, f"invalid request: file format not supported ({show(name)}); send {known}")
        if len(data) > max_size:
            raise ApiError(413, f"the file ({len(data)} bytes) is over this server's {max_size} bytes")
        try:  # checked before any work, as /translate does
            options = engine.resolve(replace(server_options, tgt_lang=target))
        except InputError as err:
            raise ApiError(400, f"invalid request: {err}") from None

        def read_as(languages: Sequence[str]) -> list[FileDocument]:
            return [read_file(data, form, languages[0], show(name))]

        language = translating.scope.source if source == "auto" else source
        job = Job(read_as, (language,), source == "auto", target, "file")
        done = await translating.run(job, options, request.receive)
        [document], [sentences] = done.documents, done.hypotheses
        translated = await asyncio.to_thread(document.rebuild, [hyps[0] for hyps in sentences])
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
