"""Reading and writing a recipe: YAML in, checked ``Config`` out, and back.

Loading rejects unknown keys (suggesting the closest valid one), wrong types and values outside
their choices (``schema``) and inconsistent combinations (``rules``), each as a ``ConfigError``
naming the key.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from pathlib import Path
from typing import Any

import yaml

from mt_cli.config.legacy import upgrade_corpora
from mt_cli.config.rules import check_recipe
from mt_cli.config.schema import apply_override, build
from mt_cli.config.sections import Config, DataConfig
from mt_cli.errors import ConfigError

# What a warm start takes from its parent unless its recipe says otherwise (it must agree anyway).
INHERITED = ("model", "tokenizer")


def load_config(
    path: str | Path,
    overrides: typing.Sequence[str] = (),
    parent_sections: typing.Callable[[str, tuple[str, str]], dict[str, Any]] | None = None,
) -> Config:
    """Read a YAML recipe (a path, or the name of a shipped one such as ``multi30k``), apply
    ``section.key=value`` overrides, validate everything.

    ``parent_sections`` (``train.warm_start.parent_sections``): for a recipe with
    ``train.init_from``, the parent's ``model`` and ``tokenizer`` sections, under the recipe's own
    keys: a warm start's recipe need not repeat the parent's architecture."""
    from mt_cli.disk.resources import resolve_recipe

    path = resolve_recipe(path)
    if path.is_dir():
        raise ConfigError(f"config {path} is a directory; give a YAML file such as {path / 'config.yaml'}")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as err:
        raise ConfigError(f"cannot read config {path}: {err.strerror or err}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path} is not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} must hold a mapping of sections, not {type(raw).__name__}")
    for item in overrides:
        apply_override(raw, item)
    if parent_sections is not None:
        raw = _inherited(raw, parent_sections)
    return config_from_dict(raw)


def _inherited(
    raw: dict[str, Any], parent_sections: typing.Callable[[str, tuple[str, str]], dict[str, Any]]
) -> dict[str, Any]:
    train = raw.get("train")
    spec = train.get("init_from") if isinstance(train, dict) else None
    if not isinstance(spec, str) or not spec.strip():
        return raw  # no warm start, or a bad value the rules name
    data = raw.get("data") if isinstance(raw.get("data"), dict) else {}
    languages = (
        str(data.get("src_lang", DataConfig.src_lang)),
        str(data.get("tgt_lang", DataConfig.tgt_lang)),
    )
    sections = parent_sections(spec, languages)
    merged = dict(raw)
    for name in INHERITED:
        given = raw.get(name)
        if name in sections and (given is None or isinstance(given, dict)):
            merged[name] = sections[name] | (given or {})
    return merged


def config_from_dict(raw: dict[str, Any]) -> Config:
    config = build(Config, upgrade_corpora(raw, warn=True), prefix="")
    check_recipe(config)
    return config


def config_to_dict(config: Any) -> dict[str, Any]:
    """Plain YAML-ready data (tuples become lists, enums their values) that ``config_from_dict`` or
    ``card_from_dict`` reads."""

    def plain(value: Any) -> Any:
        if isinstance(value, enum.Enum):
            return value.value
        if isinstance(value, (tuple, list)):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {key: plain(v) for key, v in value.items()}
        return value

    return plain(dataclasses.asdict(config))


def save_config(config: Config, path: str | Path) -> None:
    from mt_cli.disk.files import atomic_write_bytes

    text = yaml.safe_dump(config_to_dict(config), sort_keys=False, allow_unicode=True)
    atomic_write_bytes(Path(path), lambda handle: handle.write(text.encode("utf-8")))
