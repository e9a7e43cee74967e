"""The README's sentences that a test can check: its layout names every module of mt_cli and
every shipped recipe, and none that does not exist; every command takes ``-h`` and, but for
``mt config``, ``--run``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from mt_cli.cli import app

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mt_cli"
README = (ROOT / "README.md").read_text(encoding="utf-8")

# The head of a layout entry: one folder ("cli/") or one or more files ("errors.py version.py").
HEAD = re.compile(r"(?P<folder>[\w-]+/)|(?P<files>[\w-]+\.\w+(?: [\w-]+\.\w+)*)(?=\s|$)")


def layout() -> dict[str, list[str]]:
    """The README's layout block as {entry: its text}: "mt_cli/cli/" -> the text after it, a
    file of the package root ("mt_cli/errors.py") -> the text after it, "configs/" -> its text."""
    block = README.split("\n## Layout\n", 1)[1].split("```", 2)[1]
    entries: dict[str, list[str]] = {}
    parent, current = "", None
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        head = HEAD.match(line.strip())
        if indent <= 2 and head:
            if indent == 0:  # a top-level folder: mt_cli/, configs/, tests/
                parent = head.group("folder") or ""
                current = parent
            elif head.group("folder"):  # a wing of mt_cli
                current = parent + head.group("folder")
            else:  # files in mt_cli itself
                for name in head.group("files").split():
                    entries[parent + name] = []
                current = None
                continue
            entries.setdefault(current, []).append(line.strip()[head.end() :])
        elif current is not None and line.strip():
            entries[current].append(line.strip())
    return entries


def named_files(folder: str, suffix: str) -> set[str]:
    """The files of ``folder`` (an entry of the layout) that its text names, with ``suffix``."""
    text = " ".join(layout().get(folder, []))
    return set(re.findall(rf"(?<![\w./-])([\w-]+{re.escape(suffix)})\b", text))


def test_the_layout_names_every_module_and_none_that_does_not_exist() -> None:
    entries = layout()
    named: set[str] = {key for key in entries if key.startswith("mt_cli/") and not key.endswith("/")}
    for key in entries:
        if key.startswith("mt_cli/") and key.endswith("/") and key != "mt_cli/":
            named |= {key + name for name in named_files(key, ".py") | named_files(key, ".html")}
    present = {
        str(path.relative_to(ROOT))
        for path in PACKAGE.rglob("*")
        if path.suffix in (".py", ".html") and path.stem not in ("__init__", "__main__")
    }
    assert not sorted(present - named), f"README.md's layout does not name {sorted(present - named)}"
    assert not sorted(named - present), f"README.md's layout names {sorted(named - present)}, not in mt_cli"


def test_the_layout_names_every_shipped_recipe() -> None:
    named = named_files("configs/", ".yaml")
    assert named == {path.name for path in (ROOT / "configs").glob("*.yaml")}


def test_the_layout_names_the_shared_test_modules() -> None:
    named = named_files("tests/", ".py")
    shared = {path.name for path in (ROOT / "tests").glob("*.py") if not path.name.startswith("test_")}
    assert shared <= named, f"README.md's layout does not name tests/{sorted(shared - named)}"


def test_the_layout_parser_sees_entries() -> None:
    """The checks above read what the parser finds: it must find the wings and the root files."""
    entries = layout()
    expected = {"mt_cli/cli/", "mt_cli/data/", "mt_cli/errors.py", "mt_cli/version.py", "configs/"}
    assert expected <= set(entries)
    assert "recipe.py" in named_files("mt_cli/cli/", ".py")


COMMANDS = typer.main.get_command(app).commands  # type: ignore[attr-defined]
WITHOUT_A_RUN = {"config"}  # the README says so: "Every command ... but for `mt config`"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_takes_help_and_a_run_but_config(name: str) -> None:
    result = CliRunner().invoke(app, [name, "-h"])
    assert result.exit_code == 0 and "Usage:" in result.output, result.output
    options = {option for param in COMMANDS[name].params for option in getattr(param, "opts", [])}
    assert ("--run" in options) == (name not in WITHOUT_A_RUN)


def test_the_readme_names_the_commands_without_a_run() -> None:
    for name in WITHOUT_A_RUN:
        assert f"but for `mt {name}`" in README
