"""resources.py: the recipes and the corpus that ship with mt, found from any directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from mt_cli.config.recipe import load_config
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import RECIPES, SHIPPED_MULTI30K, recipe_names, resolve_recipe
from mt_cli.errors import ConfigError


def test_named_recipes_resolve_from_any_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert {"multi30k", "quick", "tiny"} <= set(recipe_names())
    assert resolve_recipe("multi30k") == resolve_recipe("multi30k.yaml") == RECIPES / "multi30k.yaml"
    assert load_config("quick").run_dir == "runs/quick"


def test_an_existing_path_wins_over_a_shipped_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("quick").write_text("run_dir: runs/mine\n", encoding="utf-8")
    assert resolve_recipe("quick") == Path("quick")
    assert load_config("quick").run_dir == "runs/mine"


def test_unknown_recipe_lists_the_shipped_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        ConfigError, match=r"config file quik does not exist; .*\(multi30k, .*multi30k-en-de, .*quick, tiny"
    ):
        resolve_recipe("quik")
    with pytest.raises(ConfigError, match="configs/quick.yaml does not exist"):
        resolve_recipe("configs/quick.yaml")  # a path is a path: no lookup by name


def test_the_shipped_corpus_is_the_official_task1_files() -> None:
    sizes = {"train": 29000, "val": 1014, "test_2016_flickr": 1000}
    for stem, pairs in sizes.items():
        de, en = (read_lines(SHIPPED_MULTI30K / f"{stem}.{lang}.gz") for lang in ("de", "en"))
        assert len(de) == len(en) == pairs
    assert read_lines(SHIPPED_MULTI30K / "train.en.gz")[0].startswith("Two young, White males are outside")
