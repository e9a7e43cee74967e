"""LibreTranslate's ``POST /suggest``: a user's correction of a translation, stored in the
suggestions database (``data.suggestions``) so that a run can train on it.

Off unless ``mt serve --suggestions PATH`` names the database, as in LibreTranslate: then every
/suggest is a 403 "Suggestions are disabled on this server." and ``/frontend/settings`` says
``"suggestions": false``. On, a request gives ``q`` (the text), ``s`` (its corrected translation),
``source`` and ``target`` (a direction the model translates; not ``auto``: a row is training data,
and its language must be known), optionally ``translatedText`` (the translation that was corrected,
which LibreTranslate's page does not send) and ``api_key`` (checked as for /translate when the
server has keys; stored as a keyed hash, ``data.suggestion_keys``). Each field is checked first (a
400 in one line: one missing or blank, over ``--max-chars``, a ``q`` and ``s`` of different line
counts, a direction the model does not know), and ``{"success": true}`` answers once the row is
committed to disk.

One thread writes (``Store``): requests queue their rows (at most ``MAX_PENDING``; more is a 429),
and the thread commits everything waiting in one transaction, so a burst costs one sync, not one
per row. A row whose commit failed (a full disk) is a 503 with SQLite's reason. On stop the
thread commits what is queued before the server exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Request

from mt_cli.data.suggestions import INSERT, Suggestion, open_for_writing
from mt_cli.serve.access import Access, Caller
from mt_cli.serve.errors import ApiError, show
from mt_cli.serve.scope import Scope

logger = logging.getLogger("mt.serve")

MAX_PENDING = 4096  # rows waiting for the writer; more is a 429
GROUP = 1024  # rows committed in one transaction at most
DISABLED = "Suggestions are disabled on this server."  # LibreTranslate's words


class NotStored(Exception):
    """The commit of a row failed (SQLite's reason): the disk's fault, not the client's."""


@dataclass
class _Job:
    """A row on its way to disk, and the request waiting for it on its event loop."""

    suggestion: Suggestion
    loop: asyncio.AbstractEventLoop
    done: asyncio.Future[None]

    def settle(self, error: Exception | None) -> None:
        """From the writer thread: the row is committed (``error`` None) or failed."""
        self.loop.call_soon_threadsafe(_settle, self.done, error)


def _settle(done: asyncio.Future[None], error: Exception | None) -> None:
    if done.done():  # the request was cancelled (its client left): the row is stored all the same
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)


class Store:
    """The suggestions database and the one thread that writes it; ``path`` None: disabled."""

    def __init__(self, path: Path | None, max_pending: int = MAX_PENDING) -> None:
        self.path = path
        self._queue: queue.Queue[_Job | None] = queue.Queue(max_pending)
        self._thread: threading.Thread | None = None
        self._closing = False

    @property
    def enabled(self) -> bool:
        return self.path is not None

    async def start(self) -> None:
        """Open the database on the writer thread; its InputError raised here if it cannot be."""
        if self.path is None:
            return
        opened: Future[None] = Future()
        # A daemon: a server that dies without closing the store must still exit. A row it had not
        # committed was never acknowledged, and SQLite's transactions keep the file whole.
        self._thread = threading.Thread(
            target=self._write, args=(self.path, opened), name="mt-suggestions", daemon=True
        )
        self._thread.start()
        await asyncio.wrap_future(opened)

    async def add(self, suggestion: Suggestion) -> None:
        """Returns once ``suggestion`` is committed; an ApiError if it cannot be (429, 503)."""
        if self._closing or self._thread is None:
            raise ApiError(503, "the server is stopping; send the suggestion again", {"Connection": "close"})
        loop = asyncio.get_running_loop()
        job = _Job(suggestion, loop, loop.create_future())
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            raise ApiError(
                429, f"Slowdown: {self._queue.maxsize} suggestions wait", {"Retry-After": "1"}
            ) from None
        try:
            await job.done
        except NotStored as err:
            raise ApiError(503, f"cannot store the suggestion now: {err}", {"Retry-After": "5"}) from None

    async def close(self) -> None:
        """Commit everything queued, then close the database and end the thread."""
        if self._thread is None:
            return
        self._closing = True
        await asyncio.to_thread(self._queue.put, None)  # after every queued row
        await asyncio.to_thread(self._thread.join)
        self._thread = None

    def _write(self, path: Path, opened: Future[None]) -> None:
        """The writer thread: group commits until ``close``'s None arrives."""
        try:
            connection = open_for_writing(path)
        except Exception as err:  # every failure, a bug too, is raised by start(), never left to hang it
            opened.set_exception(err)
            return
        opened.set_result(None)
        try:
            while (first := self._queue.get()) is not None:
                jobs, last = [first], False
                while len(jobs) < GROUP:  # and whatever else waits: one transaction, one sync
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:  # close() puts it after every row it lets in
                        last = True
                        break
                    jobs.append(more)
                self._commit(connection, jobs)
                if last:
                    break
        finally:
            connection.close()

    def _commit(self, connection: sqlite3.Connection, jobs: list[_Job]) -> None:
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.executemany(INSERT, [job.suggestion.row() for job in jobs])
            connection.execute("COMMIT")
        except sqlite3.Error as err:
            # SQLite may have rolled back already; the commit's error is the one to report.
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
            logger.error("mt serve: %d suggestions not stored in %s: %s", len(jobs), self.path, err)
            for job in jobs:
                job.settle(NotStored(str(err)))
            return
        for job in jobs:
            job.settle(None)


def parse_suggestion(fields: dict[str, Any], scope: Scope, received: datetime) -> Suggestion:
    """The row a /suggest request asks to store, or the ApiError (400) that refuses it."""
    q, s = _text(fields, "q", scope.max_chars), _text(fields, "s", scope.max_chars)
    source, target = _text(fields, "source", scope.max_chars), _text(fields, "target", scope.max_chars)
    if source == "auto":
        raise ApiError(400, "invalid request: source must be the language of q; auto is not accepted here")
    if (source, target) not in scope.directions:
        raise ApiError(
            400,
            f"{show(source)} -> {show(target)} is not available; this server translates {scope.describe()}",
        )
    # Training reads a pair per line (data.suggestions): both texts need as many.
    q_lines, s_lines = q.count("\n") + 1, s.count("\n") + 1
    if q_lines != s_lines:
        raise ApiError(
            400,
            f"invalid request: q has {q_lines} lines and s {s_lines}; give one line of s for each line of q",
        )
    translation = fields.get("translatedText")
    if translation == "":  # as a form sends a field left empty
        translation = None
    if translation is not None and not isinstance(translation, str):
        raise ApiError(400, "invalid request: translatedText must be a string")
    if translation is not None and len(translation) > scope.max_chars:
        message = f"translatedText has {len(translation)} characters, over this server's {scope.max_chars}"
        raise ApiError(400, f"invalid request: {message}")
    key = fields.get("api_key")
    created = received.astimezone(timezone.utc).isoformat(timespec="milliseconds")
    return Suggestion(
        q, s, source, target, translation, created, key if isinstance(key, str) and key else None
    )


def _text(fields: dict[str, Any], name: str, limit: int) -> str:
    """The field ``name``: a string with more than white space, of at most ``limit`` characters."""
    value = fields.get(name)
    if value is None or value == "":
        raise ApiError(400, f"invalid request: missing {name} parameter")
    if not isinstance(value, str):
        raise ApiError(400, f"invalid request: {name} must be a string")
    if not value.strip():
        raise ApiError(400, f"invalid request: {name} is blank")
    if len(value) > limit:
        raise ApiError(
            400, f"invalid request: {name} has {len(value)} characters, over this server's {limit}"
        )
    return value


def add_route(
    app: FastAPI,
    store: Store,
    scope: Scope,
    access: Access,
    read_fields: Callable[[Request], Awaitable[dict[str, Any]]],
) -> None:
    """``POST /suggest`` on ``app``: its fields read by ``read_fields``, then (on) its caller
    admitted by ``access``."""

    async def fields_when_on(fields: dict[str, Any] = Depends(read_fields)) -> dict[str, Any]:
        if not store.enabled:  # before the key: off is off for every caller
            raise ApiError(403, DISABLED)
        return fields

    admit = access.admission(fields_when_on)

    @app.post("/suggest")
    async def suggest(
        fields: dict[str, Any] = Depends(fields_when_on), caller: Caller = Depends(admit)
    ) -> dict[str, bool]:
        limited = replace(scope, max_chars=caller.char_limit)
        await store.add(parse_suggestion(fields, limited, datetime.now(timezone.utc)))
        return {"success": True}
