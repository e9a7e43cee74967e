"""LibreTranslate requests as real clients send them, read into one validated object or an ``ApiError``.

A body is JSON (``Content-Type: application/json``) or a form (url-encoded, as libretranslatepy
and ``curl -d`` send it, or multipart, as a browser's ``FormData`` does); for a form the query
string counts too, as it does in LibreTranslate's Flask app. Every mistake is an ``ApiError``
with the HTTP status the server answers, ``{"error": message}`` as the body: 400 for a bad
field, for JSON nested too deeply, or for text that cannot be encoded as UTF-8 (a lone surrogate,
which a JSON escape can make) in any field (``access.py`` checks the key, with its 403;
``body.py`` reads the body, with its 413, 408 and 503). A message repeats a client's value only
through ``show``. The choices LibreTranslate leaves open:

* ``format`` is ``text`` (the default) or ``html`` (the ``documents`` wing reads both): a text's
  lines are split into sentences, an HTML text's text into sentences across its inline tags, its
  markup kept; the sentences of all of a request's texts are decoded together and put back in
  their places, with the whitespace, line breaks (CR LF too) and markup around them as they were
  (``request``). Sentences are split by the source language's rules (auto: each text's detected one).
* ``source`` and ``target`` choose one of the directions the model knows (``GET /languages``
  lists them); a multilingual model gets the target's tag before each sentence. ``source:
  "auto"`` takes any target the model writes; ``detect.py`` then finds each text's language (a
  400 if the model cannot translate it into the target) and the answer carries LibreTranslate's
  ``detectedLanguage`` (``{"confidence", "language"}``, a list for a list ``q``).
* ``alternatives`` (N, a JSON number or a string of digits, as a form sends it; missing, null or
  "" is 0) asks for N more translations of each text, which the answer lists as LibreTranslate
  does (``alternatives.py`` says how they are made); more than the server's limit is a 400, as in
  LibreTranslate, and so is a negative N (which LibreTranslate takes as 0).
* ``glossary`` (mt's, not LibreTranslate's; /translate and /translate_file) gives terms the
  translation must use: a JSON object of source term to target term, or a text of one term a
  line, tab-separated, as ``mt translate --glossary`` reads a file (a form sends that). At most
  ``GLOSSARY_ENTRIES`` terms; a bad line is a 400 naming it, and so is a glossary for a model
  not trained with terms. ``glossary_mode`` ``guarantee`` forces the terms into the translation
  (constrained beam search, mt's engine), as ``mt translate --glossary-mode guarantee`` does.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request

from mt_cli.config.options import GlossaryMode
from mt_cli.documents.formats import DocumentFormat
from mt_cli.errors import DataError
from mt_cli.serve.errors import ApiError, show
from mt_cli.serve.request import TranslateRequest
from mt_cli.serve.scope import Scope
from mt_cli.text.glossary import Glossary

_INTEGER = re.compile(r"(-?)([0-9]+)")  # ASCII digits only: int() would also take "٣" and "1_0"
GLOSSARY_ENTRIES = 10_000  # terms one request's glossary may hold
_LONGEST = 18  # digits read of an integer: int() refuses past 4,300, and any limit is far below
TEXT_FORMATS = (DocumentFormat.TEXT, DocumentFormat.HTML)  # /translate's, as LibreTranslate's


async def read_fields(request: Request, body: bytes) -> dict[str, Any]:
    """The request's fields from its JSON object or its form (plus the query string), every text
    in them checked to be encodable."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json" or content_type.endswith("+json"):
        fields = _json_fields(body)
    elif content_type in ("", "application/x-www-form-urlencoded", "multipart/form-data"):
        fields = _multi_dict(request.query_params.multi_items())
        if body:
            fields.update(await _form_fields(request, body))
    else:
        raise ApiError(400, f"unsupported Content-Type {show(content_type)}: send JSON or a form")
    check_encodable(fields)
    return fields


def check_encodable(fields: dict[str, Any]) -> None:
    """A 400 naming the field if a name or any text in a value (at any depth) cannot be encoded
    as UTF-8: JSON's "\\ud800" escapes decode to lone surrogates, which SentencePiece refuses
    (inside a batch, failing every request in it) and no answer could repeat."""
    for name, value in fields.items():
        if not _encodable(name):
            raise ApiError(400, f"invalid request: the field name {show(name)} is not valid UTF-8 text")
        if not _all_encodable(value):
            raise ApiError(400, f"invalid request: {show(name)} is not valid UTF-8 text (a lone surrogate)")


def _all_encodable(value: Any) -> bool:
    """Whether every string in ``value`` (JSON: lists and objects at any depth, keys included)
    can be encoded; not recursive, since JSON may be nested as deep as the parser allows."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not _encodable(item):
                return False
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
    return True


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _json_fields(body: bytes) -> dict[str, Any]:
    try:
        fields = json.loads(body)
    except ValueError as err:  # bad JSON and bytes that are not UTF-8 alike
        raise ApiError(400, f"invalid JSON body: {err}") from None
    except RecursionError:  # the parser recurses per level: "[" * 60000 exhausts the stack
        raise ApiError(400, "invalid JSON body: nested too deeply") from None
    if not isinstance(fields, dict):
        raise ApiError(400, "invalid JSON body: expected an object of fields")
    return fields


async def _form_fields(request: Request, body: bytes) -> dict[str, Any]:
    async def replay() -> dict[str, Any]:  # the body was already read (and measured) above
        return {"type": "http.request", "body": body, "more_body": False}

    try:
        form = await Request(request.scope, replay).form()
    except HTTPException as err:  # Starlette's 400 for a malformed form (in an app's scope)
        raise ApiError(400, f"invalid form body: {err.detail}") from None
    except MultiPartException as err:  # the same outside an app (a bare scope)
        raise ApiError(400, f"invalid form body: {err.message}") from None
    try:
        if any(not isinstance(value, str) for _, value in form.multi_items()):
            raise ApiError(400, "file fields are not accepted; send q as text")
        return _multi_dict(form.multi_items())  # type: ignore[arg-type]
    finally:
        await form.close()  # an uploaded file is spooled to a temporary file


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


def parse_translate(fields: dict[str, Any], scope: Scope) -> TranslateRequest:
    """A /translate request: q, source, target and format checked against the server's directions."""
    texts, batch = _texts(fields, scope)
    source, target = parse_direction(fields, scope)
    text_format = _text_field(fields, "format", default="text")
    if text_format not in (form.value for form in TEXT_FORMATS):
        raise ApiError(400, f"{show(text_format)} format is not supported; send format=text or format=html")
    alternatives = _alternatives(fields, scope.max_alternatives)
    request = TranslateRequest(
        texts,
        batch,
        auto=source == "auto",
        alternatives=alternatives,
        target=target,
        form=DocumentFormat(text_format),
        # auto: the first source's rules until the texts' languages are detected (``job``)
        languages=(scope.source if source == "auto" else source,) * len(texts),
    )
    return request


def parse_direction(fields: dict[str, Any], scope: Scope) -> tuple[str, str]:
    """(source, target) of a request, a direction the server translates (source may be "auto")."""
    source, target = _text_field(fields, "source"), _text_field(fields, "target")
    if source != "auto" and source not in scope.sources:
        raise ApiError(
            400,
            f"{show(source)} is not supported as a source language; this server has "
            f"{', '.join(scope.sources)} (or auto)",
        )
    if target not in scope.targets or (source != "auto" and (source, target) not in scope.directions):
        raise ApiError(
            400,
            f"{show(source)} -> {show(target)} is not available; this server translates {scope.describe()}",
        )
    return source, target


def parse_detect(fields: dict[str, Any], scope: Scope) -> list[str]:
    """The texts of a /detect request (q, a string or a list), checked as for /translate."""
    return _texts(fields, scope)[0]


def _texts(fields: dict[str, Any], scope: Scope) -> tuple[list[str], bool]:
    """(q as a list of texts, whether q was a list), or a 400 if q is missing, empty or too long."""
    q = fields.get("q")
    if q is None or q == "" or q == []:
        raise ApiError(400, "invalid request: missing q parameter")
    batch = isinstance(q, list)
    texts = q if batch else [q]
    if not all(isinstance(text, str) for text in texts):
        raise ApiError(400, "invalid request: q must be a string or a list of strings")
    chars = sum(len(text) for text in texts)
    if chars > scope.max_chars:
        raise ApiError(
            400, f"invalid request: q has {chars} characters, over this server's {scope.max_chars}"
        )
    return texts, batch


def parse_glossary(fields: dict[str, Any], source: str, target: str) -> tuple[Glossary | None, GlossaryMode]:
    """The request's ``glossary`` in the direction ``source`` -> ``target`` (None without one) and
    its ``glossary_mode``."""
    return _glossary(fields, source, target), _glossary_mode(fields)


def _glossary_mode(fields: dict[str, Any]) -> GlossaryMode:
    value = fields.get("glossary_mode")
    if value is None or value == "":
        return GlossaryMode.APPEND
    modes = ", ".join(mode.value for mode in GlossaryMode)
    if not isinstance(value, str) or value not in {mode.value for mode in GlossaryMode}:
        raise ApiError(400, f"invalid request: glossary_mode {show(str(value))} is not one of {modes}")
    return GlossaryMode(value)


def _glossary(fields: dict[str, Any], source: str, target: str) -> Glossary | None:
    value = fields.get("glossary")
    if value is None or value == "" or value == {}:
        return None
    if isinstance(value, dict):
        if not all(isinstance(term, str) for pair in value.items() for term in pair):
            raise ApiError(400, "invalid request: glossary maps source terms to target terms, all strings")
        lines = [f"{term}\t{translation}" for term, translation in value.items()]
    elif isinstance(value, str):
        lines = value.splitlines()
    else:
        raise ApiError(
            400, "invalid request: glossary is an object of terms or a text of tab-separated lines"
        )
    if len(lines) > GLOSSARY_ENTRIES:
        raise ApiError(
            400, f"invalid request: the glossary has {len(lines)} lines; at most {GLOSSARY_ENTRIES}"
        )
    try:
        return Glossary.parse(lines, "glossary", source, target)
    except DataError as err:
        raise ApiError(400, f"invalid request: {err}") from None


def _alternatives(fields: dict[str, Any], limit: int) -> int:
    """``alternatives`` as a count from 0 to ``limit``; missing, null or "" is 0 (as ``format``
    left empty is its default), a bool is no number although Python counts it as one."""
    value = fields.get("alternatives")
    if value is None or value == "":
        return 0
    if isinstance(value, str) and (match := _INTEGER.fullmatch(value.strip())):
        digits = match.group(2).lstrip("0") or "0"
        number = int(digits) if len(digits) <= _LONGEST else 10**_LONGEST
        value = -number if match.group(1) else number
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, "invalid request: alternatives parameter is not a whole number")
    if value < 0:
        raise ApiError(400, "invalid request: alternatives parameter must be >= 0")
    if value > limit:
        message = f"invalid request: alternatives parameter must be <= {limit} (--alternatives-limit)"
        raise ApiError(400, message)
    return value


def _text_field(fields: dict[str, Any], name: str, default: str | None = None) -> str:
    """The string field ``name``; a 400 if it is missing (unless it has a default) or not a string."""
    value = fields.get(name)
    if value is None or value == "":
        if default is not None:
            return default
        raise ApiError(400, f"invalid request: missing {name} parameter")
    if not isinstance(value, str):
        raise ApiError(400, f"invalid request: {name} must be a string")
    return value
