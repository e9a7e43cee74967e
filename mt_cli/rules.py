"""The value ranges and cross-key rules that types alone cannot express, each checked once.

A recipe passes all of them when it loads (``config.load_config``); a trained model's card
(``config.ModelCard``) passes those of the sections inference reads (data, model, decode), so a
training section that a later version of mt would reject does not stop a model from translating.
Code below the config trusts these. What depends on the machine or on files is checked where
that is known, before any work: the device and precision (``runtime.device``), an installed
extra (``train.progress``), what an export format supports (``export``).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import TYPE_CHECKING

from mt_cli.errors import ConfigError

if TYPE_CHECKING:
    from mt_cli.config import (
        Config,
        CorpusConfig,
        DataConfig,
        DecodeConfig,
        ModelConfig,
        TokenizerConfig,
        TrainConfig,
    )

SPLITS = ("train", "val", "test", "test2016", "test2017", "mscoco2017", "test2018")
MULTI30K_LANGUAGES = ("de", "en", "fr", "cs")  # task 1 as mt ships it: line i is one sentence in all four
# The keys of a data.corpora entry that only source=backtranslation reads, and those it never reads.
TRANSLATION_KEYS = tuple("run text side beam_size sampling top_k top_p temperature seed cache_dir".split())
_SOURCE_KEYS = ("files", "tables", "columns", "hub", "hub_config", "hub_splits")
SPECIAL_PIECES = ("<pad>", "<unk>", "<s>", "</s>")  # the tokenizers' own; a tag cannot be one of them
_TAG = re.compile(r"<[^<>\s]+>")
_LANGUAGE = re.compile(r"[a-z]{2,3}([_-][A-Za-z0-9]+)*")
FREEZABLE = ("encoder", "embeddings", "decoder", "output")  # the choices of config.TrainConfig.freeze
_PROBABILITIES = (
    "dropout",
    "attention_dropout",
    "activation_dropout",
    "src_token_dropout",
    "tgt_token_dropout",
)


def require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def check_recipe(cfg: Config) -> None:
    """Every rule, for a recipe that is about to train."""
    check_data(cfg.data)
    check_model(cfg.model)
    check_decode(cfg.decode, cfg.model)
    check_tokenizer(cfg.tokenizer, cfg.model)
    check_train(cfg.train)
    d, m, t = cfg.data, cfg.model, cfg.train
    require(
        d.max_len + 2 <= m.max_positions,
        f"model.max_positions={m.max_positions} must be at least data.max_len + 2 = {d.max_len + 2}",
    )
    require(
        t.max_tokens >= 2 * d.max_len,
        f"train.max_tokens={t.max_tokens} must hold one pair of data.max_len={d.max_len} tokens per side "
        f"(>= {2 * d.max_len})",
    )


def check_data(d: DataConfig) -> None:
    require(d.src_lang != d.tgt_lang, f"data.src_lang and data.tgt_lang are both {d.src_lang!r}")
    require(d.max_len >= 2, f"data.max_len={d.max_len} must be at least 2")
    require(d.train_limit is None or d.train_limit > 0, f"data.train_limit={d.train_limit} must be positive")
    require(
        d.max_length_ratio is None or d.max_length_ratio >= 1,
        f"data.max_length_ratio={d.max_length_ratio} must be at least 1 (or null: no ratio filter)",
    )
    require(d.workers >= 0, f"data.workers={d.workers} must be 0 (the training process) or more")
    splits = ", ".join(SPLITS)
    require(d.test_split in SPLITS, f"data.test_split={d.test_split!r} is not valid; choose one of {splits}")
    entries = d.entries()
    target_tags = {target_tag(lang) for lang in d.languages()[1]}
    for index, entry in enumerate(entries):
        _check_corpus(entry, f"data.corpora[{index}]." if d.corpora else "data.", target_tags)
    for index, entry in enumerate(d.corpora):  # as written: entries() fills in dir
        _check_translated(entry, f"data.corpora[{index}].", first=index == 0)
    if d.corpora:
        _check_single_source_unset(d)
        first = entries[0]
        require(
            (first.src_lang, first.tgt_lang) == (d.src_lang, d.tgt_lang),
            f"data.corpora[0] translates {first.src_lang}->{first.tgt_lang} but data.src_lang and "
            f"data.tgt_lang say {d.src_lang}->{d.tgt_lang}: the first corpus gives validation and test, "
            "in the run's direction; reorder data.corpora or change data.src_lang/tgt_lang",
        )


def target_tag(lang: str) -> str:
    """The tag that tells a multilingual model which language to write (Johnson et al. 2017)."""
    return f"<2{lang}>"


def _check_single_source_unset(d: DataConfig) -> None:
    """With ``data.corpora`` the single-source keys would describe a second, ignored corpus."""
    given = {
        "source": d.source != "multi30k",
        "files": bool(d.files),
        "tables": bool(d.tables),
        "columns": bool(d.columns),
        "hub": d.hub is not None,
        "hub_config": d.hub_config is not None,
        "hub_splits": bool(d.hub_splits),
    }
    extra = next((key for key, set_ in given.items() if set_), None)
    require(
        extra is None,
        f"data.{extra} describes a single corpus but data.corpora is set: move it into its corpus entry",
    )


def _check_corpus(c: CorpusConfig, p: str, target_tags: set[str]) -> None:
    """One corpus (an entry of ``data.corpora``, or the data section itself, ``p`` its key prefix)."""
    splits = ", ".join(SPLITS)
    require(
        c.source is not None,
        f"{p.rstrip('.')} has no source: set {p}source to one of multi30k, files, table, hub"
        + (", backtranslation" if p != "data." else ""),
    )
    for side in ("src_lang", "tgt_lang"):
        _check_language(f"{p}{side}", getattr(c, side), c.source)
    require(c.src_lang != c.tgt_lang, f"{p}src_lang and {p}tgt_lang are both {c.src_lang!r}")
    require(c.train_limit is None or c.train_limit > 0, f"{p}train_limit={c.train_limit} must be positive")
    require(
        math.isfinite(c.weight) and c.weight > 0,
        f"{p}weight={c.weight} must be positive: each pair is drawn that many times per epoch",
    )
    if c.tag is not None:
        require(
            _TAG.fullmatch(c.tag) is not None and c.tag not in SPECIAL_PIECES,
            f"{p}tag={c.tag!r} must look like <bt>: one word in angle brackets, not one of "
            f"{', '.join(SPECIAL_PIECES)}",
        )
        require(
            c.tag not in target_tags, f"{p}tag={c.tag!r} is the run's target-language tag; choose another"
        )
    for split, pair in c.files.items():
        require(split in SPLITS, f"{p}files.{split} is not a split; choose from {splits}")
        require(len(pair) == 2, f"{p}files.{split} must be [source_file, target_file]")
    if c.source == "files":
        require("train" in c.files, f"{p}source=files needs {p}files.train: [source_file, target_file]")
    for split in c.tables:
        require(split in SPLITS, f"{p}tables.{split} is not a split; choose from {splits}")
    for split in c.hub_splits:
        require(split in SPLITS, f"{p}hub_splits.{split} is not a split; choose from {splits}")
    if c.source in ("table", "hub"):
        require(len(c.columns) == 2, f"{p}source={c.source} needs {p}columns: [source_column, target_column]")
    if c.source == "table":
        require("train" in c.tables, f"{p}source=table needs {p}tables.train: [file, ...]")
    if c.source == "hub":
        require(c.hub is not None, f"{p}source=hub needs {p}hub: the dataset's name (e.g. wmt14)")


def _check_translated(c: CorpusConfig, p: str, first: bool) -> None:
    """The keys of ``source: backtranslation`` (text translated by another run), on that source
    only, and the keys of other sources never on it."""
    given = [f.name for f in dataclasses.fields(c) if getattr(c, f.name) != _default(f)]
    if c.source != "backtranslation":
        extra = next((key for key in given if key in TRANSLATION_KEYS), None)
        require(
            extra is None,
            f"{p}{extra} is a key of source=backtranslation; remove it or set {p}source: backtranslation",
        )
        return
    require(
        not first,
        f"{p}source=backtranslation cannot come first: the first corpus gives validation and test; "
        "put a corpus of real pairs first",
    )
    extra = next((key for key in given if key in ("dir", *_SOURCE_KEYS)), None)
    require(extra is None, f"{p}{extra} has no meaning for source=backtranslation; remove it")
    require(
        c.run is not None and bool(c.run.strip()),
        f"{p}source=backtranslation needs {p}run: the run whose model translates the text (RUN or "
        "RUN:CHECKPOINT)",
    )
    require(
        bool(c.text) and all(path.strip() for path in c.text),
        f"{p}source=backtranslation needs {p}text: [file, ...], one sentence per line",
    )
    require(c.beam_size is None or c.beam_size >= 1, f"{p}beam_size={c.beam_size} must be at least 1")
    require(c.cache_dir is None or bool(c.cache_dir.strip()), f"{p}cache_dir is empty; give a directory")
    if not c.sampling:
        extra = next((key for key in ("top_k", "top_p", "temperature", "seed") if key in given), None)
        require(extra is None, f"{p}{extra} is a sampling option: set {p}sampling: true, or remove it")
        return
    require(
        c.beam_size in (None, 1),
        f"{p}sampling draws one translation per line and cannot search with {p}beam_size={c.beam_size}; "
        "remove beam_size",
    )
    require(
        c.top_k is None or c.top_k >= 1, f"{p}top_k={c.top_k} must be at least 1 (null keeps every token)"
    )
    require(
        c.top_p is None or 0.0 < c.top_p <= 1.0, f"{p}top_p={c.top_p} must be in (0, 1] (1 keeps every token)"
    )
    require(
        c.temperature is None or 0.0 <= c.temperature < math.inf,
        f"{p}temperature={c.temperature} must be a number >= 0 (0 means greedy)",
    )


def _default(f: dataclasses.Field) -> object:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _check_language(key: str, lang: str | None, source: str | None) -> None:
    if source == "multi30k":
        require(
            lang in MULTI30K_LANGUAGES,
            f"{key}={lang!r} is not a Multi30k language; choose from {', '.join(MULTI30K_LANGUAGES)}",
        )
    # It names files (spm.LANG.model) and tags (<2LANG>): a language code, nothing else.
    require(
        lang is not None and _LANGUAGE.fullmatch(lang) is not None,
        f"{key}={lang!r} is not a language code (ISO 639: two or three lowercase letters, "
        "optionally a script or region, e.g. de, fra, zh_Hans)",
    )


def check_model(m: ModelConfig) -> None:
    for name in ("d_model", "n_heads", "d_ff", "encoder_layers", "decoder_layers", "max_positions"):
        require(getattr(m, name) >= 1, f"model.{name}={getattr(m, name)} must be at least 1")
    require(
        m.d_model % m.n_heads == 0, f"model.d_model={m.d_model} is not divisible by model.n_heads={m.n_heads}"
    )
    require(m.d_model % 2 == 0, f"model.d_model={m.d_model} must be even (sinusoidal positions)")
    for name in _PROBABILITIES:
        require(0.0 <= getattr(m, name) < 1.0, f"model.{name}={getattr(m, name)} must be in [0, 1)")


def check_decode(dec: DecodeConfig, m: ModelConfig) -> None:
    require(dec.beam_size >= 1, f"decode.beam_size={dec.beam_size} must be at least 1")
    require(
        dec.max_len_a >= 0 and dec.max_len_b >= 1, "decode.max_len_a must be >= 0 and decode.max_len_b >= 1"
    )
    require(
        dec.max_tokens >= m.max_positions,
        f"decode.max_tokens={dec.max_tokens} must be >= model.max_positions={m.max_positions}",
    )


def check_tokenizer(tok: TokenizerConfig, m: ModelConfig) -> None:
    for name in ("src_vocab_size", "tgt_vocab_size"):
        require(getattr(tok, name) >= 8, f"tokenizer.{name}={getattr(tok, name)} must be at least 8")
    require(0.0 < tok.character_coverage <= 1.0, "tokenizer.character_coverage must be in (0, 1]")
    require(tok.sample_sentences >= 1, f"tokenizer.sample_sentences={tok.sample_sentences} must be positive")
    require(
        not tok.joint or tok.src_vocab_size == tok.tgt_vocab_size,
        f"tokenizer.joint needs one vocabulary size: tokenizer.src_vocab_size={tok.src_vocab_size} and "
        f"tokenizer.tgt_vocab_size={tok.tgt_vocab_size} differ",
    )
    for name in ("src_bpe_dropout", "tgt_bpe_dropout"):
        value = getattr(tok, name)
        require(0.0 <= value < 1.0, f"tokenizer.{name}={value} must be in [0, 1)")
        require(
            value == 0.0 or tok.model_type == "bpe",
            f"tokenizer.{name} needs tokenizer.model_type=bpe (got {tok.model_type!r})",
        )
    require(
        not m.share_embeddings or tok.src_vocab_size == tok.tgt_vocab_size,
        "model.share_embeddings needs tokenizer.src_vocab_size == tokenizer.tgt_vocab_size "
        f"(got {tok.src_vocab_size} and {tok.tgt_vocab_size})",
    )


def check_train(t: TrainConfig) -> None:
    for name in (
        "accum_steps",
        "keep_last",
        "save_every_steps",
        "log_every_steps",
        "max_bad_steps",
        "max_epochs",
    ):
        require(getattr(t, name) >= 1, f"train.{name}={getattr(t, name)} must be at least 1")
    for name in ("max_steps", "validate_every_steps", "patience", "warmup_steps", "average_last"):
        require(getattr(t, name) >= 0, f"train.{name}={getattr(t, name)} must be >= 0")
    require(t.lr > 0, f"train.lr={t.lr} must be positive")
    require(t.max_minutes >= 0, f"train.max_minutes={t.max_minutes} must be >= 0")
    require(0.0 <= t.label_smoothing < 1.0, f"train.label_smoothing={t.label_smoothing} must be in [0, 1)")
    require(t.clip_norm >= 0, f"train.clip_norm={t.clip_norm} must be >= 0 (0 disables)")
    require(t.weight_decay >= 0, f"train.weight_decay={t.weight_decay} must be >= 0")
    require(all(0 <= b < 1 for b in t.optimizer_betas), "train.optimizer_betas must each be in [0, 1)")
    require(
        t.average_last <= t.keep_last,
        f"train.average_last={t.average_last} cannot exceed train.keep_last={t.keep_last}",
    )
    check_schedule(t)
    check_warm_start(t)


def check_warm_start(t: TrainConfig) -> None:
    """``train.init_from`` and what goes with it; the parent itself is checked when training starts
    (``train.warm_start``), since that needs its files."""
    if t.init_from is None:
        for name in ("init_keep", "freeze"):
            require(
                not getattr(t, name),
                f"train.{name} needs train.init_from (a parent run to start from); remove it or set both",
            )
        return
    require(bool(t.init_from.strip()), "train.init_from is empty; give RUN or RUN:CHECKPOINT, or null")
    for name in ("init_keep", "freeze"):
        values = getattr(t, name)
        require(len(set(values)) == len(values), f"train.{name}={values} repeats a name")
    require(
        set(t.freeze) != set(FREEZABLE),
        f"train.freeze names every part ({', '.join(FREEZABLE)}): nothing would train",
    )
    # The parent's optimizer state covers every parameter in two groups; frozen ones leave the groups.
    require(
        "optimizer" not in t.init_keep or not t.freeze,
        "train.init_keep: [optimizer] cannot go with train.freeze (the parent's optimizer state covers "
        "every parameter); drop one of them",
    )
    # Cosine and linear decay end at this run's own horizon; an offset would skip part of the decay.
    require(
        "schedule" not in t.init_keep or t.schedule not in ("cosine", "linear"),
        f"train.init_keep: [schedule] continues a schedule, and train.schedule={t.schedule} decays over "
        "this run's own horizon; use inverse_sqrt, noam or constant, or drop schedule from train.init_keep",
    )


def check_schedule(t: TrainConfig) -> None:
    require(
        t.schedule == "constant" or t.warmup_steps >= 1,
        f"train.schedule={t.schedule} needs train.warmup_steps >= 1",
    )
    decays = t.schedule in ("cosine", "linear")
    if decays and t.lr_horizon == "max_minutes":
        require(
            t.max_minutes > 0,
            "train.lr_horizon=max_minutes needs a time budget: "
            f"set train.max_minutes > 0 (got {t.max_minutes})",
        )
    require(
        not decays or t.max_steps > t.warmup_steps or (t.lr_horizon == "max_minutes" and t.max_steps == 0),
        f"train.schedule={t.schedule} decays to zero at train.max_steps, which must exceed "
        f"train.warmup_steps={t.warmup_steps} (got {t.max_steps}; "
        "with train.lr_horizon=max_minutes, 0 means no cap)",
    )
