"""The ``--api-keys`` file: one key a line, each with its own limits if it has any.

A line is a key, optionally followed by its limits, LibreTranslate's per-key ``req_limit`` and
``char_limit``; a line starting with ``#`` (after spaces) and a blank line are no key::

    # a comment: a line starting with #
    3f1c0a2e-1b2d-4c5e-9f00-000000000001
    3f1c0a2e-1b2d-4c5e-9f00-000000000002 120
    3f1c0a2e-1b2d-4c5e-9f00-000000000003 req_limit=0 char_limit=20000

The first key has the server's limits, the second 120 requests a minute, the third no request
limit and 20,000 characters a request; no comment follows a key on its line (a key may hold a
``#``). ``req_limit`` is the key's requests a minute in place of ``--req-limit`` (0: none), also
written as a bare number after the key (LibreTranslate's ``ltmanage keys add 120``);
``char_limit`` the characters one of its requests may send in place of ``--max-chars`` (at
least 1). A mistake is one line naming the file and the line number (exit 2). Free of fastapi:
the command reads the file before the model loads."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mt_cli.errors import InputError

_NUMBER = re.compile(r"[0-9]{1,12}")  # ASCII digits only (int() would take "٣" and "1_0")
FIELDS = ("req_limit", "char_limit")


@dataclass(frozen=True)
class KeyLimits:
    """One key's own limits; None: the server's (``--req-limit``, ``--max-chars``)."""

    req_limit: int | None = None  # requests a minute; 0: none
    char_limit: int | None = None  # characters of one request, all its texts together


def read_keys(path: Path) -> dict[str, KeyLimits]:
    """The keys of the ``--api-keys`` file ``path`` with their limits, or an InputError in one line."""
    from mt_cli.disk.reading import check_input_file, read_lines

    check_input_file(path, "--api-keys")
    keys = parse_keys(read_lines(path), f"--api-keys {path}")
    if not keys:
        raise InputError(f"--api-keys {path} holds no key; write one key a line")
    return keys


def parse_keys(lines: list[str], where: str) -> dict[str, KeyLimits]:
    """The keys of ``lines``; ``where`` names the file in an error."""
    keys: dict[str, KeyLimits] = {}
    for number, line in enumerate(lines, start=1):
        words = line.split()
        # A comment line is no key: "# staging" would otherwise let anyone who sends it in.
        if not words or words[0].startswith("#"):
            continue
        key, rest = words[0], words[1:]
        if key in keys:  # two lines for one key: which limits hold would be a guess
            raise InputError(f"{where} line {number}: this key is also on an earlier line")
        try:
            keys[key] = _limits(rest)
        except ValueError as err:
            raise InputError(f"{where} line {number}: {err}") from None
    return keys


def _limits(words: list[str]) -> KeyLimits:
    """A key's limits from the words after it: ``N`` (its req_limit) or ``name=N`` fields."""
    found: dict[str, int] = {}
    for index, word in enumerate(words):
        name, equals, value = word.partition("=")
        if not equals and index == 0 and _NUMBER.fullmatch(word):  # as LibreTranslate's "keys add N"
            name, value = "req_limit", word
        if name not in FIELDS:
            # Not repeated: two keys on a line by mistake would print a secret to the log.
            raise ValueError(
                f"word {index + 2} is not a limit; write KEY, KEY N or KEY req_limit=N char_limit=N"
            )
        if name in found:
            raise ValueError(f"{name} is given twice")
        if not _NUMBER.fullmatch(value):
            raise ValueError(f"{name} {value!r} is not a whole number >= 0")
        found[name] = int(value)
    if found.get("char_limit") == 0:
        raise ValueError("char_limit 0 would refuse every request; give at least 1")
    return KeyLimits(found.get("req_limit"), found.get("char_limit"))


def largest_char_limit(keys: Mapping[str, KeyLimits], default: int) -> int:
    """The most characters any request may send: ``default`` or a key's larger own limit (the
    body is read, and its size bounded, before its key is known)."""
    return max([default, *(limits.char_limit for limits in keys.values() if limits.char_limit)])
