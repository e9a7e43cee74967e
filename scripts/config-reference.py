"""Print the config-key tables of docs/reference.md from the config dataclasses.

    python scripts/config-reference.py > /tmp/keys.md   # then paste over the "Config keys" tables

Type and default come from mt_cli/config/sections.py; the meaning is the comment beside the key in
configs/multi30k.yaml (continuation lines included), so the two documents cannot drift apart. The
keys of a ``data.corpora`` entry are documented there as commented lines (``#   key: value  #
meaning``, two more spaces after ``#`` per level of a nested block such as ``decode``) under
``corpora:``; an entry key without one means what the data key of its name means.
"""

from __future__ import annotations

import dataclasses
import re
import typing

from mt_cli.config.options import Sampling, TranslateOptions
from mt_cli.config.recipe import config_to_dict, load_config
from mt_cli.config.sections import Config, CorpusConfig
from mt_cli.disk.resources import RECIPES


def comments() -> dict[str, str]:
    """``section.key`` -> its comment in multi30k.yaml."""
    found: dict[str, str] = {}
    section, last, nested = "", "", [""]
    for line in (RECIPES / "multi30k.yaml").read_text(encoding="utf-8").splitlines():
        if re.match(r"^\w+:\s*$", line):
            section = line.rstrip(":").strip() + "."
            continue
        key = re.match(r"^\s*(\w+):[^#]*#\s?(.*)$", line)
        entry = re.match(r"^\s+#(\s+)(\w+):[^#]*#\s?(.*)$", line)  # a key of a data.corpora entry
        more = re.match(r"^\s+#\s?(.*)$", line)
        if entry:
            depth = (len(entry.group(1)) - 3) // 2  # "#   key": 0; "#     key": a key of the block above
            nested = [*nested[: depth + 1], entry.group(2)]
            last = "data.corpora[]." + ".".join(nested[1:])
            found[last] = entry.group(3).strip()
        elif key:
            last = (section if line.startswith(" ") else "") + key.group(1)
            found[last] = key.group(2).strip()
        elif more and last:
            found[last] += " " + more.group(1).strip()
    return found


def choices(hint: object) -> tuple[str, ...] | None:
    """The values of a ``Literal`` (or of an optional one, with None), else None."""
    if typing.get_origin(hint) is typing.Literal:
        return tuple(map(str, typing.get_args(hint)))
    args = typing.get_args(hint)
    if type(None) in args and len(args) == 2:
        inner = choices(next(a for a in args if a is not type(None)))
        return None if inner is None else (*inner, "None")
    return None


def type_name(hint: object) -> str:
    if (values := choices(hint)) is not None:
        return " \\| ".join(values)
    text = str(hint).replace("typing.", "").replace("<class '", "").replace("'>", "")
    for module in ("mt_cli.config.sections.", "mt_cli.config.options."):
        text = text.replace(module, "")
    return text.replace("|", "\\|")


def meaning(note: str, hint: object) -> str:
    """The comment without a leading list of the choices (the type column has them), table-safe."""
    if (values := choices(hint)) is not None:
        note = note.removeprefix(" | ".join(v for v in values if v != "None")).strip()
    return note.replace("|", "\\|")


def main() -> None:
    notes, defaults = comments(), config_to_dict(Config())
    recipe = config_to_dict(load_config("multi30k"))
    hints = typing.get_type_hints(Config)
    print("| key | type | built-in default | `multi30k` | meaning |\n|---|---|---|---|---|")
    print(
        f"| `run_dir` | str | `{defaults['run_dir']}` | `{recipe['run_dir']}` | "
        f"{meaning(notes['run_dir'], str)} |"
    )
    for section in (f for f in dataclasses.fields(Config) if dataclasses.is_dataclass(hints[f.name])):
        section_hints = typing.get_type_hints(hints[section.name])
        for field in dataclasses.fields(hints[section.name]):
            name, hint = f"{section.name}.{field.name}", section_hints[field.name]
            default, used = defaults[section.name][field.name], recipe[section.name][field.name]
            print(
                f"| `{name}` | {type_name(hint)} | `{default}` | `{used}` | "
                f"{meaning(notes.get(name, ''), hint)} |"
            )
            if name == "data.corpora":
                entry_rows(notes)


def entry_rows(notes: dict[str, str]) -> None:
    """The keys of one ``data.corpora`` entry (the default recipe has none: its column is empty)."""
    hints, defaults = typing.get_type_hints(CorpusConfig), dataclasses.asdict(CorpusConfig())
    for field in dataclasses.fields(CorpusConfig):
        name = f"data.corpora[].{field.name}"
        note = notes.get(name) or f"as `data.{field.name}`" + (
            " (left out: its value)" if field.name in ("src_lang", "tgt_lang", "dir", "train_limit") else ""
        )
        hint = hints[field.name]
        print(f"| `{name}` | {type_name(hint)} | `{defaults[field.name]}` | — | {meaning(note, hint)} |")
        if field.name == "decode":
            nested_rows(notes, name, TranslateOptions, ("beam", "length_penalty", "n_best", "sampling"))
            nested_rows(notes, f"{name}.sampling", Sampling, ("top_k", "top_p", "temperature", "seed"))


def nested_rows(notes: dict[str, str], prefix: str, block: type, keys: tuple[str, ...]) -> None:
    """The keys of a block nested in a corpus entry (its ``decode``, that block's ``sampling``)."""
    hints, defaults = typing.get_type_hints(block), dataclasses.asdict(block())
    for key in keys:
        name, hint = f"{prefix}.{key}", hints[key]
        print(f"| `{name}` | {type_name(hint)} | `{defaults[key]}` | — | {meaning(notes[name], hint)} |")


if __name__ == "__main__":
    main()
