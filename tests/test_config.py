"""Config strictness: every mistake is a ConfigError that names the key."""

import runpy
from pathlib import Path

import pytest

from mt_cli.config.recipe import config_from_dict, config_to_dict, load_config, save_config
from mt_cli.config.sections import Config, DataConfig
from mt_cli.disk.resources import recipe_names
from mt_cli.errors import ConfigError

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


@pytest.mark.parametrize("name", [f"{name}.yaml" for name in recipe_names()])
def test_shipped_recipes_load(name: str) -> None:
    cfg = load_config(CONFIGS / name)
    assert {cfg.data.src_lang, cfg.data.tgt_lang} == {"de", "en"}


def test_every_default_recipe_key_is_documented() -> None:
    text = (CONFIGS / "multi30k.yaml").read_text()
    for section, values in config_to_dict(Config()).items():
        keys = values if isinstance(values, dict) else {section: values}
        for key in keys:
            line = next((ln for ln in text.splitlines() if ln.strip().startswith(f"{key}:")), None)
            assert line is not None and "#" in line, f"{section}.{key} is not documented in multi30k.yaml"


def test_override_is_parsed_to_the_field_type() -> None:
    cfg = load_config(
        CONFIGS / "tiny.yaml", ["train.lr=0.01", "model.norm_first=true", "train.optimizer_betas=[0.9, 0.99]"]
    )
    assert cfg.train.lr == 0.01 and cfg.model.norm_first is True
    assert cfg.train.optimizer_betas == (0.9, 0.99)
    assert isinstance(load_config(CONFIGS / "tiny.yaml", ["train.lr=1"]).train.lr, float)


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("train.lrr=0.1", "did you mean train.lr"),
        ("modell.d_model=4", "did you mean model"),
        ("train.lr=fast", "train.lr='fast' must be a number"),
        ("model.encoder_layers=2.5", "model.encoder_layers=2.5 must be an integer"),
        ("model.norm_first=1", "model.norm_first=1 must be true or false"),
        ("model.activation=tanh", "choose one of relu, gelu"),
        ("train.amp=fp8", "choose one of auto, bf16, fp16, off"),
        ("model.n_heads=5", "not divisible by model.n_heads=5"),
        ("tokenizer.src_vocab_size=4", "tokenizer.src_vocab_size=4 must be at least 8"),
        ("model.dropout=1.5", "model.dropout=1.5 must be in [0, 1)"),
        ("tokenizer.src_bpe_dropout=1", "tokenizer.src_bpe_dropout=1.0 must be in [0, 1)"),
        ("model.share_embeddings=true", "model.share_embeddings needs"),
        ("tokenizer.joint=true", "tokenizer.joint needs one vocabulary size"),
        ("data.max_length_ratio=0.5", "data.max_length_ratio=0.5 must be at least 1"),
        ("data.source=table", "data.source=table needs data.columns"),
        ("tokenizer.sample_sentences=0", "tokenizer.sample_sentences=0 must be positive"),
        ("data.max_len=500", "model.max_positions"),
        ("train.average_last=9", "cannot exceed train.keep_last"),
        ("data.test_split=test2099", "choose one of train, val, test, test2016"),
        ("train", "must look like section.key=value"),
    ],
)
def test_bad_values_name_the_key(override: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(CONFIGS / "tiny.yaml", [override])
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_bpe_dropout_needs_a_bpe_model() -> None:
    with pytest.raises(ConfigError, match="tokenizer.tgt_bpe_dropout needs tokenizer.model_type=bpe"):
        load_config(CONFIGS / "tiny.yaml", ["tokenizer.tgt_bpe_dropout=0.1", "tokenizer.model_type=unigram"])
    assert (
        load_config(CONFIGS / "tiny.yaml", ["tokenizer.tgt_bpe_dropout=0.1"]).tokenizer.tgt_bpe_dropout == 0.1
    )


def test_unknown_key_lists_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"valid: .*d_model"):
        config_from_dict({"model": {"width": 3}})


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(bad)


def test_files_source_needs_train_pair() -> None:
    with pytest.raises(ConfigError, match="data.files.train"):
        config_from_dict({"data": {"source": "files"}})
    with pytest.raises(ConfigError, match=r"\[source_file, target_file\]"):
        config_from_dict({"data": {"source": "files", "files": {"train": ["a"]}}})


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    cfg = load_config(CONFIGS / "multi30k.yaml", ["model.d_model=128", "data.files={val: [a, b]}"])
    save_config(cfg, tmp_path / "config.yaml")
    assert load_config(tmp_path / "config.yaml") == cfg
    many = load_config("multi30k-many-to-en")
    save_config(many, tmp_path / "many.yaml")
    assert load_config(tmp_path / "many.yaml") == many
    assert [(e.src_lang, e.tgt_lang) for e in many.data.entries()] == [
        ("de", "en"),
        ("fr", "en"),
        ("cs", "en"),
    ]


MULTI30K = {"source": "multi30k"}


@pytest.mark.parametrize(
    ("corpora", "fragment"),
    [
        (
            [{"src_lang": "de"}],
            "data.corpora[0] has no source: set data.corpora[0].source to one of multi30k",
        ),
        (
            [MULTI30K, {"source": "multi30k", "src_lang": "ja"}],
            "data.corpora[1].src_lang='ja' is not a Multi30k",
        ),
        (
            [MULTI30K, {"source": "files", "files": {"train": ["a", "b"]}, "tgt_lang": "English"}],
            "not a language",
        ),
        (
            [MULTI30K, {"source": "multi30k", "src_lang": "fr", "weight": 0}],
            "data.corpora[1].weight=0.0 must be",
        ),
        ([{"source": "multi30k", "weight": -2}], "data.corpora[0].weight=-2.0 must be positive"),
        ([{"source": "multi30k", "weigth": 2}], "unknown config key data.corpora[0].weigth; did you mean"),
        ([{"source": "multi30k", "tag": "bt"}], "data.corpora[0].tag='bt' must look like <bt>"),
        ([{"source": "multi30k", "tag": "</s>"}], "not one of <pad>, <unk>, <s>, </s>"),
        ([MULTI30K, {"source": "multi30k", "tgt_lang": "fr", "tag": "<2en>"}], "target-language tag"),
        ([{"source": "multi30k", "src_lang": "fr"}], "data.corpora[0] translates fr->en but data.src_lang"),
        ([{"source": "files"}], "data.corpora[0].source=files needs data.corpora[0].files.train"),
        ([{"source": "csv"}], "data.corpora[0].source='csv' is not valid; choose one of multi30k"),
        ([MULTI30K, {"source": "multi30k", "src_lang": "en"}], "data.corpora[1].src_lang and "),
        ("multi30k", "data.corpora='multi30k' must be a list"),
    ],
)
def test_bad_corpus_entries_are_one_line_errors(corpora: object, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict({"data": {"corpora": corpora}})
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_single_source_keys_go_into_the_entries() -> None:
    with pytest.raises(ConfigError, match="data.files describes a single corpus but data.corpora is set"):
        config_from_dict({"data": {"files": {"train": ["a", "b"]}, "corpora": [MULTI30K]}})
    with pytest.raises(ConfigError, match="data.source describes a single corpus"):
        config_from_dict({"data": {"source": "hub", "corpora": [MULTI30K]}})


def test_a_bad_corpus_entry_exits_2_with_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    recipe = tmp_path / "bad.yaml"
    recipe.write_text("data:\n  corpora:\n    - {source: multi30k, src_lang: xx}\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "mt_cli", "config", "--config", str(recipe)], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: data.corpora[0].src_lang='xx' is not a Multi30k language; choose from de, en, fr, cs"
    ]


def test_entries_inherit_the_data_sections_languages_dir_and_limit() -> None:
    data = config_from_dict(
        {
            "data": {
                "dir": "m30k",
                "train_limit": 5,
                "corpora": [
                    MULTI30K,
                    {"source": "multi30k", "src_lang": "fr", "train_limit": 2, "weight": 0.5},
                ],
            }
        }
    ).data
    first, second = data.entries()
    assert (first.src_lang, first.tgt_lang, first.dir, first.train_limit) == ("de", "en", "m30k", 5)
    assert (second.src_lang, second.tgt_lang, second.dir, second.train_limit) == ("fr", "en", "m30k", 2)
    assert data.sides() == ("de+fr", "en") and not data.uses_target_tags()
    # The single-source keys are a one-entry list.
    (only,) = config_from_dict({"data": {"src_lang": "cs", "tgt_lang": "de"}}).data.entries()
    assert (only.source, only.src_lang, only.tgt_lang, only.weight, only.tag) == (
        "multi30k",
        "cs",
        "de",
        1.0,
        None,
    )


def test_several_target_languages_turn_target_tags_on() -> None:
    from mt_cli.text.tags import corpus_prefix, source_tags, translation_prefix

    both = [MULTI30K, {"source": "multi30k", "src_lang": "en", "tgt_lang": "de", "tag": "<bt>"}]
    data = config_from_dict({"data": {"corpora": both}}).data
    assert data.uses_target_tags() and data.sides() == ("de+en", "en+de")
    assert source_tags(data) == ["<2en>", "<2de>", "<bt>"]
    assert [corpus_prefix(data, e) for e in data.entries()] == ["<2en> ", "<2de> <bt> "]
    assert translation_prefix(data) == "<2en> " and translation_prefix(data, "de") == "<2de> "
    one = config_from_dict({"data": {"target_tags": True}}).data
    assert source_tags(one) == ["<2en>"] and corpus_prefix(one, one.entries()[0]) == "<2en> "
    assert source_tags(DataConfig()) == [] and translation_prefix(DataConfig()) == ""


def test_the_readme_example_of_several_corpora_loads() -> None:
    import yaml

    readme = (CONFIGS.parent / "README.md").read_text(encoding="utf-8")
    block = next(b for b in readme.split("```yaml\n")[1:] if "corpora:" in b).split("```")[0]
    data = config_from_dict(yaml.safe_load(block)).data
    assert [(e.source, e.src_lang, e.weight, e.tag) for e in data.entries()] == [
        ("multi30k", "de", 1.0, None),
        ("multi30k", "fr", 1.0, None),
        ("files", "cs", 3.0, "<web>"),
    ]


def test_config_module_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, mt_cli.config.sections; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_reference_table_of_keys_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(CONFIGS.parent / "scripts" / "config-reference.py"), run_name="__main__")
    reference = (CONFIGS.parent / "docs" / "reference.md").read_text(encoding="utf-8")
    table = reference.split("<!-- config keys: begin -->\n")[1].split("<!-- config keys: end -->")[0]
    assert table == capsys.readouterr().out, "run scripts/config-reference.py and paste its table"


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"terms_share": 0}, "data.terms_share=0.0 must be a share of the dictionary's matches"),
        ({"terms_hidden": 1.5}, "data.terms_hidden=1.5 must be a share of the annotated terms, from 0 to 1"),
        ({"placeholders": -0.1}, "data.placeholders=-0.1 must be a share of the training pairs"),
    ],
)
def test_term_and_placeholder_shares_out_of_range_are_one_line_errors(data: dict, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict({"data": data})
    assert fragment in str(err.value) and "\n" not in str(err.value)
