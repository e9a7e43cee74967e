"""The package's shape: its import graph has no cycle (type-only imports counted), every
package's docstring names each of its modules, every wing has its place in the layers, and each
"imports only" contract of pyproject.toml forbids every wing its sentence does not name, so the
prose cannot drift from the tree. And the suite's own shape: no test file imports another."""

from __future__ import annotations

import ast
import graphlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: import-linter's own TOML reader
    import tomli as tomllib

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


def top_level_imports(path: Path) -> set[str]:
    """The first part of every absolute import in ``path``, wherever it is (functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found


def test_specials_imports_nothing_but_re() -> None:
    """Its docstring: "with no import but ``re``"."""
    assert top_level_imports(PACKAGE / "specials.py") <= {"__future__", "re"}


def test_the_command_line_loads_no_heavy_module_before_a_command_runs() -> None:
    """cli's docstring: torch, datasets and matplotlib are imported inside the commands that need
    them, so ``mt --help`` starts fast (the extras too); export.quantization's: the CLI names the
    weight types without torch."""
    heavy = {"torch", "datasets", "matplotlib", "fastapi", "uvicorn", "lingua", "ctranslate2", "transformers"}
    code = "import sys, mt_cli.cli, mt_cli.export.quantization; print(*sorted(sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    loaded = {module.split(".")[0] for module in run.stdout.split()}
    assert not loaded & heavy, f"importing mt_cli.cli loads {sorted(loaded & heavy)}"


# --- the import contracts: every wing placed, every "only" complete -------------------------

WINGS = {path.stem for path in PACKAGE.glob("*.py") if path.stem not in ("__init__", "__main__")}
WINGS |= {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
PYPROJECT = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
IMPORTLINTER = PYPROJECT["tool"]["importlinter"]
CONTRACTS = IMPORTLINTER["contracts"]


def wings_of(modules: list[str]) -> set[str]:
    """The wings among ``modules`` ("mt_cli.data" -> "data"); a module inside a wing is not one."""
    return {module.split(".")[1] for module in modules if re.fullmatch(r"mt_cli\.\w+", module)}


def named_wings(text: str) -> set[str]:
    return set(re.findall(r"\w+", text)) & WINGS


def test_the_layers_place_every_wing() -> None:
    (layers,) = [contract for contract in CONTRACTS if contract["type"] == "layers"]
    placed = [module.strip() for layer in layers["layers"] for module in layer.split("|")]
    assert wings_of(placed) == WINGS and len(placed) == len(WINGS)


ONLY = [c for c in CONTRACTS if c["type"] == "forbidden" and " only " in c["name"]]


def test_the_imports_only_sentences_are_contracts() -> None:
    assert IMPORTLINTER["include_external_packages"] is True  # torch, fastapi... forbidden by name
    assert len(ONLY) >= 10


@pytest.mark.parametrize("contract", ONLY, ids=lambda contract: contract["name"].split(" (")[0])
def test_an_only_contract_forbids_every_wing_it_does_not_name(contract: dict) -> None:
    """A name "W imports only A, B ...: never C" has W as its source, and forbids exactly the
    wings not named before "never" (those after it among them); in "X is imported only by W",
    every wing but W and X is a source. A wing added to mt_cli fails here until each sentence
    says whether it may be imported."""
    name, sources, forbidden = contract["name"], contract["source_modules"], contract["forbidden_modules"]
    if match := re.match(r"(\w+) imports only (.*)", name):
        wing = match.group(1)
        allowed, _, never = match.group(2).partition("never")
        assert sources == [f"mt_cli.{wing}"], "the contract's source is the wing its name starts with"
        assert named_wings(never) <= wings_of(forbidden), "a wing the name says never is not forbidden"
        assert wings_of(forbidden) == WINGS - {wing} - named_wings(allowed), (
            f"forbidden: {sorted(wings_of(forbidden))}; the name allows {sorted(named_wings(allowed))}"
        )
    elif match := re.search(r"imported only by (\w+)", name):
        importer = match.group(1)
        assert wings_of(sources) == WINGS - {importer} - wings_of(forbidden)
    else:
        pytest.fail(f"{name!r}: say 'W imports only ...' or '... imported only by W'")


# --- the suite: no test file imports another -------------------------------------------------

TESTS = Path(__file__).resolve().parent
SHARED = {"helpers", "marian_models"}  # what test files share; fixtures come from conftest by name


def test_no_test_file_imports_another_or_conftest() -> None:
    modules = {path.stem for path in TESTS.glob("*.py")}
    assert SHARED <= modules and "conftest" in modules
    wrong = {
        path.name: sorted((top_level_imports(path) & modules) - SHARED)
        for path in sorted(TESTS.glob("*.py"))
        if (top_level_imports(path) & modules) - SHARED
    }
    assert not wrong, f"move what they import into helpers.py: {wrong}"
