"""What ships with mt beside the code: the recipes in ``configs/`` and the corpus in ``data/``.

Both are found next to the package in the clone it was installed from (``pip install -e .``),
so ``mt train --config multi30k`` and the Multi30k copy work from any working directory.
"""

from __future__ import annotations

from pathlib import Path

from mt_cli.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # mt_cli/disk/resources.py -> the clone
RECIPES = PROJECT_ROOT / "configs"
SHIPPED_MULTI30K = PROJECT_ROOT / "data" / "multi30k"


def recipe_names() -> list[str]:
    """Names of the recipes that ship with mt (``multi30k``, ``quick``, ...)."""
    return sorted(p.stem for p in RECIPES.glob("*.yaml"))


def resolve_recipe(name_or_path: str | Path) -> Path:
    """A config path as given, or else the shipped recipe of that name (``multi30k`` or ``multi30k.yaml``).

    A path that exists always wins, so a local ``configs/multi30k.yaml`` edited by the user is
    the one used; a bare name is only looked up among the shipped recipes when no such file exists.
    """
    path = Path(name_or_path)
    if path.exists():
        return path
    if len(path.parts) == 1:
        shipped = RECIPES / (path.name if path.suffix in (".yaml", ".yml") else f"{path.name}.yaml")
        if shipped.is_file():
            return shipped
    names = ", ".join(recipe_names()) or "none found"
    raise ConfigError(
        f"config file {path} does not exist; give a YAML path or a shipped recipe name ({names})"
    )
