"""Config strictness: every mistake is a ConfigError that names the key."""

import runpy
from pathlib import Path

import pytest

from mt_cli.config import Config, config_from_dict, config_to_dict, load_config, save_config
from mt_cli.errors import ConfigError
from mt_cli.resources import recipe_names

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


def test_config_module_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, mt_cli.config; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_reference_table_of_keys_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(CONFIGS.parent / "scripts" / "config-reference.py"), run_name="__main__")
    reference = (CONFIGS.parent / "docs" / "reference.md").read_text(encoding="utf-8")
    table = reference.split("<!-- config keys: begin -->\n")[1].split("<!-- config keys: end -->")[0]
    assert table == capsys.readouterr().out, "run scripts/config-reference.py and paste its table"
