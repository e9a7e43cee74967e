"""Strict, frozen configuration: one dataclass per YAML section.

Every key a recipe may hold is a field here, with its type and default. Loading rejects
unknown keys (suggesting the closest valid one), wrong types, values outside their choices
and inconsistent combinations, each as a ``ConfigError`` that names the key.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from mt_cli.errors import ConfigError

SPLITS = ("train", "val", "test2016", "test2017", "mscoco2017", "test2018")


@dataclass(frozen=True)
class DataConfig:
    source: Literal["multi30k", "files"] = "multi30k"
    dir: str | None = None  # local Multi30k copy; else $MT_DATA_DIR, else the hub
    files: dict[str, list[str]] = field(default_factory=dict)  # split -> [src_path, tgt_path]
    src_lang: str = "de"
    tgt_lang: str = "en"
    max_len: int = 128  # tokens per side; longer training pairs are dropped (and counted)
    train_limit: int | None = None  # use only the first N training pairs (smoke runs)
    test_split: str = "test2016"


@dataclass(frozen=True)
class TokenizerConfig:
    src_vocab_size: int = 8000
    tgt_vocab_size: int = 6000
    model_type: Literal["bpe", "unigram"] = "bpe"
    character_coverage: float = 1.0
    src_bpe_dropout: float = 0.0  # training pairs only, resampled every epoch; 0: one fixed segmentation
    tgt_bpe_dropout: float = 0.0


@dataclass(frozen=True)
class ModelConfig:
    d_model: int = 256
    n_heads: int = 4
    d_ff: int = 1024
    encoder_layers: int = 3
    decoder_layers: int = 3
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    src_token_dropout: float = 0.0  # training source pieces replaced by <unk> with this probability
    tgt_token_dropout: float = 0.0  # the same on the decoder's teacher-forced input pieces
    activation: Literal["relu", "gelu"] = "relu"
    norm_first: bool = False
    tie_output: bool = True
    share_embeddings: bool = False
    max_positions: int = 256


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 1
    device: Literal["auto", "cpu", "cuda"] = "auto"
    amp: Literal["auto", "bf16", "fp16", "off"] = "auto"
    compile: bool = False
    max_tokens: int = 4096  # source+target tokens per batch (before accumulation)
    accum_steps: int = 1
    optimizer_betas: tuple[float, float] = (0.9, 0.98)
    optimizer_eps: float = 1e-9
    weight_decay: float = 0.0
    lr: float = 7e-4
    schedule: Literal["inverse_sqrt", "noam", "constant", "cosine", "linear"] = "inverse_sqrt"
    warmup_steps: int = 1000
    lr_horizon: Literal["max_steps", "max_minutes"] = "max_steps"  # where cosine/linear reach zero
    label_smoothing: float = 0.1
    clip_norm: float = 1.0  # 0 disables clipping
    max_epochs: int = 100
    max_steps: int = 0  # 0: no limit
    max_minutes: float = 0.0  # wall-clock training budget; 0: no limit
    validate_every_steps: int = 0  # 0: once per epoch
    val_bleu: bool = True
    test_at_end: bool = True  # score the final best.pt on data.test_split (greedy and beam)
    patience: int = 0  # validations without a better val BLEU before stopping; 0: never
    keep_last: int = 5  # recent validation checkpoints kept for averaging
    average_last: int = 0  # average the last N kept checkpoints at the end; 0: use best.pt
    save_every_steps: int = 500
    log_every_steps: int = 100
    max_bad_steps: int = 10  # consecutive non-finite losses before the run stops


@dataclass(frozen=True)
class DecodeConfig:
    beam_size: int = 5  # the recipe's decoding; greedy is always reported too
    length_penalty: float = 1.0  # GNMT alpha
    max_len_a: float = 1.2
    max_len_b: int = 10
    max_tokens: int = 8192  # source tokens per translation batch


@dataclass(frozen=True)
class Config:
    run_dir: str = "runs/multi30k"
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)


def load_config(path: str | Path, overrides: typing.Sequence[str] = ()) -> Config:
    """Read a YAML recipe (a path, or the name of a shipped one such as ``multi30k``), apply
    ``section.key=value`` overrides, validate everything."""
    from mt_cli.resources import resolve_recipe

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
        _apply_override(raw, item)
    return config_from_dict(raw)


def config_from_dict(raw: dict[str, Any]) -> Config:
    config = _build(Config, raw, prefix="")
    check_consistency(config)
    return config


def config_to_dict(config: Config) -> dict[str, Any]:
    """Plain YAML-ready data (tuples become lists) that ``config_from_dict`` reads back."""

    def plain(value: Any) -> Any:
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return plain(dataclasses.asdict(config))


def save_config(config: Config, path: str | Path) -> None:
    from mt_cli.files import atomic_write_bytes

    text = yaml.safe_dump(config_to_dict(config), sort_keys=False, allow_unicode=True)
    atomic_write_bytes(Path(path), lambda handle: handle.write(text.encode("utf-8")))


def _apply_override(raw: dict[str, Any], item: str) -> None:
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {item!r} must look like section.key=value")
    value = yaml.safe_load(text) if text else None
    *sections, leaf = key.strip().split(".")
    node = raw
    for name in sections:
        node = node.setdefault(name, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {item!r}: {name} is not a section")
    node[leaf] = value


def _build(cls: type, raw: Any, prefix: str) -> Any:
    if not isinstance(raw, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'} must be a mapping, got {raw!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    for key in raw:
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f"; did you mean {prefix}{close[0]}?" if close else ""
            raise ConfigError(f"unknown config key {prefix}{key}{hint} (valid: {', '.join(fields)})")
    values = {}
    for name, value in raw.items():
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            values[name] = _build(hint, value, prefix=f"{prefix}{name}.")
        else:
            values[name] = _coerce(value, hint, f"{prefix}{name}")
    return cls(**values)


def _coerce(value: Any, hint: Any, key: str) -> Any:
    """Check ``value`` against the type ``hint``; return it in the field's exact type."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], key)
    if origin is Literal:
        if isinstance(value, bool):  # YAML 1.1 reads a bare off/on as a boolean
            value = "on" if value else "off"
        if value not in args:
            raise ConfigError(f"{key}={value!r} is not valid; choose one of {', '.join(map(str, args))}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}={value!r} must be true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}={value!r} must be an integer")
        return value
    if hint is float:
        if isinstance(value, str):  # PyYAML reads 1e-3 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}={value!r} must be a number")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}={value!r} must be a string")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise ConfigError(f"{key}={value!r} must be a list of {len(args)} values")
        return tuple(_coerce(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}={value!r} must be a list")
        return [_coerce(v, args[0], f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}={value!r} must be a mapping")
        return {_coerce(k, args[0], key): _coerce(v, args[1], f"{key}.{k}") for k, v in value.items()}
    raise TypeError(f"config field {key} has unsupported type {hint}")  # a bug in this module


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def check_consistency(cfg: Config) -> None:
    """Value ranges and cross-field rules that types alone cannot express."""
    d, m, t, k, dec = cfg.data, cfg.model, cfg.train, cfg.tokenizer, cfg.decode
    _require(d.src_lang != d.tgt_lang, f"data.src_lang and data.tgt_lang are both {d.src_lang!r}")
    _require(d.max_len >= 2, f"data.max_len={d.max_len} must be at least 2")
    _require(
        d.max_len + 2 <= m.max_positions,
        f"model.max_positions={m.max_positions} must be at least data.max_len + 2 = {d.max_len + 2}",
    )
    _require(d.train_limit is None or d.train_limit > 0, f"data.train_limit={d.train_limit} must be positive")
    _require(
        d.test_split in SPLITS,
        f"data.test_split={d.test_split!r} is not valid; choose one of {', '.join(SPLITS)}",
    )
    for split, pair in d.files.items():
        _require(split in SPLITS, f"data.files.{split} is not a split; choose from {', '.join(SPLITS)}")
        _require(len(pair) == 2, f"data.files.{split} must be [source_file, target_file]")
    if d.source == "files":
        _require("train" in d.files, "data.source=files needs data.files.train: [source_file, target_file]")
    for name in ("src_vocab_size", "tgt_vocab_size"):
        _require(getattr(k, name) >= 8, f"tokenizer.{name}={getattr(k, name)} must be at least 8")
    _require(0.0 < k.character_coverage <= 1.0, "tokenizer.character_coverage must be in (0, 1]")
    for name in ("src_bpe_dropout", "tgt_bpe_dropout"):
        value = getattr(k, name)
        _require(0.0 <= value < 1.0, f"tokenizer.{name}={value} must be in [0, 1)")
        _require(
            value == 0.0 or k.model_type == "bpe",
            f"tokenizer.{name} needs tokenizer.model_type=bpe (got {k.model_type!r})",
        )
    for name in ("d_model", "n_heads", "d_ff", "encoder_layers", "decoder_layers", "max_positions"):
        _require(getattr(m, name) >= 1, f"model.{name}={getattr(m, name)} must be at least 1")
    _require(
        m.d_model % m.n_heads == 0, f"model.d_model={m.d_model} is not divisible by model.n_heads={m.n_heads}"
    )
    _require(m.d_model % 2 == 0, f"model.d_model={m.d_model} must be even (sinusoidal positions)")
    for name in (
        "dropout",
        "attention_dropout",
        "activation_dropout",
        "src_token_dropout",
        "tgt_token_dropout",
    ):
        _require(0.0 <= getattr(m, name) < 1.0, f"model.{name}={getattr(m, name)} must be in [0, 1)")
    _require(
        not m.share_embeddings or k.src_vocab_size == k.tgt_vocab_size,
        "model.share_embeddings needs tokenizer.src_vocab_size == tokenizer.tgt_vocab_size "
        f"(got {k.src_vocab_size} and {k.tgt_vocab_size})",
    )
    _require(
        t.max_tokens >= 2 * d.max_len,
        f"train.max_tokens={t.max_tokens} must hold one pair of data.max_len={d.max_len} tokens per side (>= {2 * d.max_len})",
    )
    for name in (
        "accum_steps",
        "keep_last",
        "save_every_steps",
        "log_every_steps",
        "max_bad_steps",
        "max_epochs",
    ):
        _require(getattr(t, name) >= 1, f"train.{name}={getattr(t, name)} must be at least 1")
    for name in ("max_steps", "validate_every_steps", "patience", "warmup_steps", "average_last"):
        _require(getattr(t, name) >= 0, f"train.{name}={getattr(t, name)} must be >= 0")
    _require(t.lr > 0, f"train.lr={t.lr} must be positive")
    _require(t.max_minutes >= 0, f"train.max_minutes={t.max_minutes} must be >= 0")
    _require(0.0 <= t.label_smoothing < 1.0, f"train.label_smoothing={t.label_smoothing} must be in [0, 1)")
    _require(t.clip_norm >= 0, f"train.clip_norm={t.clip_norm} must be >= 0 (0 disables)")
    _require(t.weight_decay >= 0, f"train.weight_decay={t.weight_decay} must be >= 0")
    _require(all(0 <= b < 1 for b in t.optimizer_betas), "train.optimizer_betas must each be in [0, 1)")
    _require(
        t.average_last <= t.keep_last,
        f"train.average_last={t.average_last} cannot exceed train.keep_last={t.keep_last}",
    )
    _require(
        t.schedule == "constant" or t.warmup_steps >= 1,
        f"train.schedule={t.schedule} needs train.warmup_steps >= 1",
    )
    decays = t.schedule in ("cosine", "linear")
    if decays and t.lr_horizon == "max_minutes":
        _require(
            t.max_minutes > 0,
            f"train.lr_horizon=max_minutes needs a time budget: set train.max_minutes > 0 (got {t.max_minutes})",
        )
    _require(
        not decays or t.max_steps > t.warmup_steps or (t.lr_horizon == "max_minutes" and t.max_steps == 0),
        f"train.schedule={t.schedule} decays to zero at train.max_steps, which must exceed "
        f"train.warmup_steps={t.warmup_steps} (got {t.max_steps}; with train.lr_horizon=max_minutes, 0 means no cap)",
    )
    _require(dec.beam_size >= 1, f"decode.beam_size={dec.beam_size} must be at least 1")
    _require(
        dec.max_len_a >= 0 and dec.max_len_b >= 1, "decode.max_len_a must be >= 0 and decode.max_len_b >= 1"
    )
    _require(
        dec.max_tokens >= m.max_positions,
        f"decode.max_tokens={dec.max_tokens} must be >= model.max_positions={m.max_positions}",
    )
