"""Print the config-key tables of docs/reference.md from the config dataclasses.

    python scripts/config-reference.py > /tmp/keys.md   # then paste over the "Config keys" tables

Type and default come from mt_cli/config.py; the meaning is the comment beside the key in
configs/multi30k.yaml (continuation lines included), so the two documents cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import re
import typing

from mt_cli.config import Config, config_to_dict, load_config
from mt_cli.resources import RECIPES


def comments() -> dict[str, str]:
    """``section.key`` -> its comment in multi30k.yaml."""
    found: dict[str, str] = {}
    section, last = "", ""
    for line in (RECIPES / "multi30k.yaml").read_text(encoding="utf-8").splitlines():
        if re.match(r"^\w+:\s*$", line):
            section = line.rstrip(":").strip() + "."
            continue
        key = re.match(r"^\s*(\w+):[^#]*#\s?(.*)$", line)
        more = re.match(r"^\s+#\s?(.*)$", line)
        if key:
            last = (section if line.startswith(" ") else "") + key.group(1)
            found[last] = key.group(2).strip()
        elif more and last:
            found[last] += " " + more.group(1).strip()
    return found


def type_name(hint: object) -> str:
    if typing.get_origin(hint) is typing.Literal:
        return " \\| ".join(str(a) for a in typing.get_args(hint))
    return str(hint).replace("typing.", "").replace("<class '", "").replace("'>", "").replace("|", "\\|")


def meaning(note: str, hint: object) -> str:
    """The comment without a leading list of the choices (the type column has them), table-safe."""
    if typing.get_origin(hint) is typing.Literal:
        note = note.removeprefix(" | ".join(str(a) for a in typing.get_args(hint))).strip()
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


if __name__ == "__main__":
    main()
