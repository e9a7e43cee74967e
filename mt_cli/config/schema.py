"""Strict conversion of YAML data into frozen dataclasses, and ``section.key=value`` overrides.

An unknown key is an error that suggests the closest valid one and lists them all; a value of the
wrong type or outside a ``Literal``'s choices is an error naming the key and the valid choices.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import types
import typing
from typing import Any, Literal

import yaml

from mt_cli.config.options import OptionError, Terms
from mt_cli.errors import ConfigError


def apply_override(raw: dict[str, Any], item: str) -> None:
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {item!r} must look like section.key=value")
    value = yaml.safe_load(text) if text else None
    *sections, leaf = key.strip().split(".")
    node = raw
    for name in sections:
        node = node.setdefault(name, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {item!r}: {name} is not a section")
    node[leaf] = value


def build(cls: type, raw: Any, prefix: str) -> Any:
    if not isinstance(raw, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'} must be a mapping, got {raw!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    for key in raw:
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f"; did you mean {prefix}{close[0]}?" if close else ""
            raise ConfigError(f"unknown config key {prefix}{key}{hint} (valid: {', '.join(fields)})")
    values = {}
    for name, value in raw.items():
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            values[name] = build(hint, value, prefix=f"{prefix}{name}.")
        else:
            values[name] = coerce(value, hint, f"{prefix}{name}")
    try:
        return cls(**values)
    except OptionError as err:  # decoding options check themselves (``options``); name the key
        raise ConfigError(f"{prefix}{err.key}: {err}") from None


def coerce(value: Any, hint: Any, key: str) -> Any:
    """Check ``value`` against the type ``hint``; return it in the field's exact type."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return coerce(value, inner[0], key)
    if dataclasses.is_dataclass(hint):  # an optional section, e.g. a model card's parent
        return build(hint, value, prefix=f"{key}.")
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        choices = [member.value for member in hint]
        if value not in choices:
            raise ConfigError(f"{key}={value!r} is not valid; choose one of {', '.join(map(str, choices))}")
        return hint(value)
    if hint is Terms:  # a live object: a glossary read for a translation
        raise ConfigError(f"{key} is given to a translation, not written in a recipe")
    if origin is Literal:
        if isinstance(value, bool):  # YAML 1.1 reads a bare off/on as a boolean
            value = "on" if value else "off"
        if value not in args:
            raise ConfigError(f"{key}={value!r} is not valid; choose one of {', '.join(map(str, args))}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}={value!r} must be true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}={value!r} must be an integer")
        return value
    if hint is float:
        if isinstance(value, str):  # PyYAML reads 1e-3 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}={value!r} must be a number")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}={value!r} must be a string")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise ConfigError(f"{key}={value!r} must be a list of {len(args)} values")
        return tuple(coerce(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}={value!r} must be a list")
        return [coerce(v, args[0], f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}={value!r} must be a mapping")
        return {coerce(k, args[0], key): coerce(v, args[1], f"{key}.{k}") for k, v in value.items()}
    raise TypeError(f"config field {key} has unsupported type {hint}")  # a bug in this module
