"""The package's shape: its import graph has no cycle (type-only imports counted), and every
package's docstring names each of its modules, so the prose cannot drift from the tree."""

from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mt_cli"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imported(path: Path) -> set[str]:
    """The mt_cli modules ``path`` imports anywhere (inside functions and ``TYPE_CHECKING`` too):
    ``from mt_cli.a import b`` counts ``mt_cli.a.b`` when that is a module, else ``mt_cli.a``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.add(name if name in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name in MODULES}


def wing(module: str) -> str:
    """``mt_cli.decode.search`` -> ``mt_cli.decode``; a root module is its own wing."""
    return ".".join(module.split(".")[:2])


def graph(group: bool) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        if module == "mt_cli":  # the public API's lazy names: the root stands above everything
            continue
        source = wing(module) if group else module
        targets = {wing(t) if group else t for t in imported(path)}
        # A package's __init__ imported as the parent of a submodule is not an edge of its own.
        edges.setdefault(source, set()).update(t for t in targets if t not in (source, "mt_cli"))
    return edges


@pytest.mark.parametrize("group", [False, True], ids=["modules", "wings"])
def test_the_import_graph_has_no_cycle(group: bool) -> None:
    try:
        tuple(graphlib.TopologicalSorter(graph(group)).static_order())
    except graphlib.CycleError as err:
        pytest.fail(f"import cycle: {' -> '.join(err.args[1])}")


def test_the_cycle_check_can_fail() -> None:
    with pytest.raises(graphlib.CycleError):
        tuple(graphlib.TopologicalSorter({"a": {"b"}, "b": {"a"}}).static_order())


PACKAGES = sorted(path.parent for path in PACKAGE.rglob("__init__.py"))


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: module_name(p / "__init__.py"))
def test_each_package_docstring_names_its_modules(package: Path) -> None:
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    named = set(re.findall(r"``([\w.]+)``", docstring))
    for line in docstring.splitlines():  # a table of wings: "    model | data    what they hold"
        if line.startswith("    "):
            named.update(re.findall(r"\w+", re.split(r"\s{2,}", line.strip())[0]))
    members = {p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")}
    members |= {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
    missing = sorted(members - named)
    assert not missing, f"{package.name}/__init__.py's docstring does not name {', '.join(missing)}"
