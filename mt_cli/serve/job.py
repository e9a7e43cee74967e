"""One request's documents translated, as ``/translate`` and ``/translate_file`` both run it.

A ``Job`` is what a route read from its request: how to read its texts into documents (by the
rules of each text's language), the languages, whether they are to be detected, and the target.
``Translating.run`` then does the same steps for both routes: the documents read off the event
loop (HTML and sentence splitting are CPU work a long text would hold the loop with); for
``source: "auto"`` each document's sentences detected (a 400 for a language the model cannot
translate into the target) and the texts read again by the rules of the language found; the
sentences decoded by the batcher in shares of the server's per-request lines, so a long file never
holds the whole queue; and the hypotheses handed back per document, for the route to rebuild its
answer. A client that hangs up cancels what it still waits for.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from starlette.types import Receive

from mt_cli.config.options import TranslateOptions
from mt_cli.errors import InputError
from mt_cli.serve import body, detect
from mt_cli.serve.alternatives import Decoded
from mt_cli.serve.batcher import Batcher
from mt_cli.serve.decoders import EngineFailed
from mt_cli.serve.errors import ApiError, show
from mt_cli.serve.scope import Scope

logger = logging.getLogger("mt.serve")


class HasUnits(Protocol):
    @property
    def units(self) -> Sequence[str]: ...


D = TypeVar("D", bound=HasUnits)


@dataclass(frozen=True)
class Job(Generic[D]):
    read: Callable[[Sequence[str]], list[D]]  # each text's language -> its documents, in order
    languages: tuple[str, ...]  # each text's source language (auto: the default, until detected)
    auto: bool  # source "auto": the languages are detected
    target: str
    what: str  # "text" or "file", as a failure names it
    max_sentences: int | None = None  # a 400 past it; None: any number, decoded in shares


@dataclass(frozen=True)
class Done(Generic[D]):
    documents: list[D]
    hypotheses: list[list[Decoded]]  # each document's sentences' hypotheses, best first
    detected: list[detect.Guess]  # each text's language found (source "auto"), else empty


@dataclass(frozen=True)
class Translating:
    """The server's parts every job runs through."""

    batcher: Batcher[TranslateOptions, Decoded]
    detector: detect.Detector
    scope: Scope

    async def run(self, job: Job[D], options: TranslateOptions, receive: Receive) -> Done[D]:
        documents = await _read(job, job.languages)
        detected: list[detect.Guess] = []
        if job.auto:
            texts = ["\n".join(document.units) for document in documents]
            detected = await asyncio.to_thread(
                detect.auto_sources, self.detector, texts, job.target, self.scope
            )
            found = tuple(guess.language for guess in detected)
            if found != job.languages:  # split again by the rules of the languages found
                documents = await _read(job, found)
        lines = [unit for document in documents for unit in document.units]
        if job.max_sentences is not None and len(lines) > job.max_sentences:
            raise ApiError(
                400,
                f"invalid request: q has {len(lines)} sentences, "
                f"over this server's {job.max_sentences} per request",
            )
        outputs = await self._decode(lines, options, receive, job.what)
        hypotheses, start = [], 0
        for document in documents:
            hypotheses.append(outputs[start : start + len(document.units)])
            start += len(document.units)
        return Done(documents, hypotheses, detected)

    async def _decode(
        self, lines: list[str], options: TranslateOptions, receive: Receive, what: str
    ) -> list[Decoded]:
        outputs: list[Decoded] = []
        share = self.scope.max_lines  # one request's share of the queue at a time
        try:
            for start in range(0, len(lines), share):
                work = self.batcher.translate(lines[start : start + share], options)
                outputs += await body.unless_client_leaves(receive, work)
        except EngineFailed as err:  # input that passed every check failed alone: mt's bug, one line
            logger.error("mt serve: the engine failed on one request: %s", err)
            raise ApiError(500, f"Cannot translate {what}: {show(str(err.cause), 200)}") from None
        return outputs


async def _read(job: Job[D], languages: Sequence[str]) -> list[D]:
    try:
        return await asyncio.to_thread(job.read, languages)
    except InputError as err:
        raise ApiError(400, f"invalid request: {err}") from None
