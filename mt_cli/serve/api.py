"""LibreTranslate requests as real clients send them, read into one validated object or an ``ApiError``.

A body is JSON (``Content-Type: application/json``) or a form (url-encoded, as libretranslatepy
and ``curl -d`` send it, or multipart, as a browser's ``FormData`` does); for a form the query
string counts too, as it does in LibreTranslate's Flask app. Every mistake is an ``ApiError``
with the HTTP status the server answers, ``{"error": message}`` as the body: 400 for a bad
field, 403 for a key, 413 for a body over the limit. The choices LibreTranslate leaves open:

* ``format`` is ``text`` (the default); ``html`` is refused with 400 rather than decoded as
  text, because this model would translate the markup as words and break it.
* ``source: "auto"`` means the model's source language; the answer carries LibreTranslate's
  ``detectedLanguage`` (``{"confidence": 100.0, "language": SRC}``, a list for a list ``q``).
  The server does not inspect the text: it knows one source language.
* Each ``q`` is split into lines (on "\\n", as ``mt translate`` reads a file) and each line is
  translated on its own, then joined again, so a text keeps its line breaks.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

DRAIN_LIMIT = 4 << 20  # bytes of an oversized body read and dropped, so the client can read its 413
CONFIDENCE = 100.0  # LibreTranslate's scale (percent) for a language it was told, not guessed


class ApiError(Exception):
    """A request the server refuses: the status and the one-line message of ``{"error": ...}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Pair:
    """The one language pair the engine translates, and what a request may send."""

    source: str
    target: str
    max_chars: int  # characters of all of a request's texts together
    max_lines: int  # lines of one request: more could never fit in the queue


@dataclass(frozen=True)
class TranslateRequest:
    texts: list[str]  # q, always as a list
    batch: bool  # q was a list, so translatedText is one
    auto: bool  # source was "auto", so the answer says which language was assumed

    def lines(self) -> list[str]:
        """Every line of every text, in order: what the engine decodes."""
        return [line for text in self.texts for line in split_lines(text)]

    def answer(self, outputs: Sequence[str], source: str) -> dict[str, Any]:
        """LibreTranslate's answer from the translations of ``lines()``, in order."""
        translated, start = [], 0
        for text in self.texts:
            count = len(split_lines(text))
            translated.append("\n".join(outputs[start : start + count]))
            start += count
        body: dict[str, Any] = {"translatedText": translated if self.batch else translated[0]}
        if self.auto:
            detected = {"confidence": CONFIDENCE, "language": source}
            body["detectedLanguage"] = [detected] * len(self.texts) if self.batch else detected
        return body


def split_lines(text: str) -> list[str]:
    """Lines split on "\\n" alone, a CR before it dropped; a final newline keeps an empty last line,
    so that joining the translations with "\\n" gives back the same line structure."""
    return [line.removesuffix("\r") for line in text.split("\n")]


async def read_fields(request: Request, max_body: int) -> dict[str, Any]:
    """The request's fields from its JSON object or its form (plus the query string)."""
    body = await read_body(request, max_body)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json" or content_type.endswith("+json"):
        return _json_fields(body)
    if content_type in ("", "application/x-www-form-urlencoded", "multipart/form-data"):
        fields = _multi_dict(request.query_params.multi_items())
        if body:
            fields.update(await _form_fields(request, body))
        return fields
    raise ApiError(400, f"unsupported Content-Type {content_type}: send JSON or a form")


async def read_body(request: Request, max_body: int) -> bytes:
    """The whole body, or a 413 as soon as the declared or the received size passes ``max_body``."""
    declared = request.headers.get("content-length")
    # One iterator for reading and draining: a second request.stream() raises once the last chunk
    # has arrived, which made a refused streamed body a 500 whenever it arrived whole.
    stream = request.stream()
    if declared is not None and declared.isdigit() and int(declared) > max_body:
        await _drain(stream, 0)
        raise ApiError(413, f"the request body ({declared} bytes) is over this server's {max_body} bytes")
    chunks, size = [], 0
    async for chunk in stream:
        size += len(chunk)
        if size > max_body:
            await _drain(stream, size)
            raise ApiError(413, f"the request body is over this server's {max_body} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _drain(stream: AsyncIterator[bytes], size: int) -> None:
    """Read and drop the rest of a refused body (up to a cap): a server that closes a connection
    with unread data makes the client's kernel reset it, and the client would lose the 413."""
    async for chunk in stream:
        size += len(chunk)
        if size > DRAIN_LIMIT:
            return


def _json_fields(body: bytes) -> dict[str, Any]:
    try:
        fields = json.loads(body)
    except ValueError as err:  # bad JSON and bytes that are not UTF-8 alike
        raise ApiError(400, f"invalid JSON body: {err}") from None
    if not isinstance(fields, dict):
        raise ApiError(400, "invalid JSON body: expected an object of fields")
    return fields


async def _form_fields(request: Request, body: bytes) -> dict[str, Any]:
    async def replay() -> dict[str, Any]:  # the body was already read (and measured) above
        return {"type": "http.request", "body": body, "more_body": False}

    try:
        form = await Request(request.scope, replay).form()
    except Exception as err:  # the form parser's failures on a malformed body are the client's mistake
        raise ApiError(400, f"invalid form body: {err}") from None
    for _, value in form.multi_items():
        if not isinstance(value, str):
            raise ApiError(400, "file fields are not accepted; send q as text")
    return _multi_dict(form.multi_items())  # type: ignore[arg-type]


def _multi_dict(items: list[tuple[str, str]]) -> dict[str, Any]:
    """Fields of a form: one value as a string, a repeated name (q=a&q=b) as a list."""
    fields: dict[str, Any] = {}
    for name, value in items:
        if name in fields:
            previous = fields[name]
            fields[name] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            fields[name] = value
    return fields


def check_key(fields: dict[str, Any], keys: frozenset[str]) -> None:
    """Nothing when no keys are configured or ``api_key`` is one of them; else a 403."""
    if not keys:
        return
    key = fields.get("api_key")
    if key is None or key == "":
        raise ApiError(403, "this server needs an API key: send api_key")
    if not isinstance(key, str) or key not in keys:
        raise ApiError(403, "invalid API key")


def parse_translate(fields: dict[str, Any], pair: Pair) -> TranslateRequest:
    """A /translate request: q, source, target and format checked against the server's pair."""
    texts, batch = _texts(fields, pair)
    source, target = _text_field(fields, "source"), _text_field(fields, "target")
    if source not in (pair.source, "auto"):
        raise ApiError(400, f"{source} is not supported as a source language; this server has {pair.source}")
    if target != pair.target:
        raise ApiError(
            400,
            f"{source} -> {target} is not available; this server translates {pair.source} -> {pair.target}",
        )
    text_format = fields.get("format") or "text"
    if text_format == "html":
        raise ApiError(400, "html format is not supported: this server translates plain text (format=text)")
    if text_format != "text":
        raise ApiError(400, f"{text_format} format is not supported; send format=text")
    request = TranslateRequest(texts, batch, auto=source == "auto")
    if len(request.lines()) > pair.max_lines:
        raise ApiError(400, f"q has {len(request.lines())} lines, over this server's {pair.max_lines}")
    return request


def parse_detect(fields: dict[str, Any], pair: Pair) -> list[str]:
    """The texts of a /detect request (q, a string or a list), checked as for /translate."""
    return _texts(fields, pair)[0]


def _texts(fields: dict[str, Any], pair: Pair) -> tuple[list[str], bool]:
    """(q as a list of texts, whether q was a list), or a 400 if q is missing, empty or too long."""
    q = fields.get("q")
    if q is None or q == "" or q == []:
        raise ApiError(400, "invalid request: missing q parameter")
    batch = isinstance(q, list)
    texts = q if batch else [q]
    if not all(isinstance(text, str) for text in texts):
        raise ApiError(400, "invalid request: q must be a string or a list of strings")
    chars = sum(len(text) for text in texts)
    if chars > pair.max_chars:
        raise ApiError(400, f"invalid request: q has {chars} characters, over this server's {pair.max_chars}")
    return texts, batch


def _text_field(fields: dict[str, Any], name: str) -> str:
    value = fields.get(name)
    if value is None or value == "":
        raise ApiError(400, f"invalid request: missing {name} parameter")
    if not isinstance(value, str):
        raise ApiError(400, f"invalid request: {name} must be a string")
    return value
