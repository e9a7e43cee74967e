"""Keys a recipe used to spell otherwise, read into today's before the schema sees them.

A ``source: backtranslation`` corpus once gave its decoding as flat keys (``beam_size``,
``sampling: true`` with ``top_k``, ``top_p``, ``temperature``, ``seed``); today they are its
``decode:`` block, a ``TranslateOptions`` (``beam``, ``length_penalty``, ``sampling: {top_k,
top_p, temperature, seed}``). A recipe that still has them loads as before, with one line on
stderr (the ``mt.config`` logger) per entry naming the block to write instead; a model card
saved before the block existed loads without one (nobody can edit it).
"""

from __future__ import annotations

import logging
from typing import Any

from mt_cli.errors import ConfigError

logger = logging.getLogger("mt.config")

FLAT_SAMPLING_KEYS = ("top_k", "top_p", "temperature", "seed")
FLAT_KEYS = ("beam_size", "sampling", *FLAT_SAMPLING_KEYS)


def upgrade_corpora(raw: dict[str, Any], warn: bool) -> dict[str, Any]:
    """``raw`` (a recipe or a card, as read from YAML) with each corpus entry's flat decoding
    keys moved into its ``decode:`` block; ``warn``: say so, once per entry. What is not a
    mapping is left for the schema to refuse."""
    data = raw["data"] if isinstance(raw, dict) and "data" in raw else None
    corpora = data["corpora"] if isinstance(data, dict) and "corpora" in data else None
    if not isinstance(corpora, list) or not any(_flat(entry) for entry in corpora):
        return raw
    upgraded = [
        _upgraded(entry, f"data.corpora[{index}].", warn) if _flat(entry) else entry
        for index, entry in enumerate(corpora)
    ]
    return {**raw, "data": {**data, "corpora": upgraded}}


def _flat(entry: object) -> bool:
    return isinstance(entry, dict) and any(key in entry for key in FLAT_KEYS)


def _upgraded(entry: dict[str, Any], prefix: str, warn: bool) -> dict[str, Any]:
    """One entry with ``decode:`` in place of its flat keys (a ConfigError if it has both, or a
    sampling option without ``sampling: true``)."""
    given = [key for key in FLAT_KEYS if key in entry]
    if "decode" in entry:
        raise ConfigError(
            f"{prefix}{given[0]} is the old spelling of a key of {prefix}decode, which is set too; "
            f"move it into {prefix}decode"
        )
    sampling = entry["sampling"] if "sampling" in entry else False
    if not isinstance(sampling, bool):
        raise ConfigError(f"{prefix}sampling={sampling!r} must be true or false")
    decode: dict[str, Any] = {}
    if "beam_size" in entry and entry["beam_size"] is not None:
        decode["beam"] = entry["beam_size"]
    options = {key: entry[key] for key in FLAT_SAMPLING_KEYS if key in entry and entry[key] is not None}
    if sampling:
        decode["sampling"] = options
    elif options:
        key = next(iter(options))
        raise ConfigError(
            f"{prefix}{key} is a sampling option: write it as {prefix}decode.sampling.{key}, or remove it"
        )
    if warn:
        keys = prefix + f", {prefix}".join(given) + (" is" if len(given) == 1 else " are")
        instead = (
            f"write {prefix}decode: {_flow(decode)}"
            if decode
            else "remove them (the run's own beam search is the default)"
        )
        logger.warning("%s deprecated: %s", keys, instead)
    rest = {key: value for key, value in entry.items() if key not in FLAT_KEYS}
    return {**rest, "decode": decode} if decode else rest


def _flow(value: object) -> str:
    """``value`` as YAML's flow style writes it on one line: ``{beam: 4, sampling: {top_k: 10}}``."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {_flow(item)}" for key, item in value.items()) + "}"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
