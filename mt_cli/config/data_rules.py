"""The rules of the data section and its corpora that types alone cannot express (see ``rules``):
sources and their keys, languages, weights, tags, and the keys of translated corpora and of
suggestions databases.
"""

from __future__ import annotations

import dataclasses
import math
import re

from mt_cli.config.sections import CorpusConfig, DataConfig
from mt_cli.errors import require
from mt_cli.specials import SPECIAL_PIECES, TAG_PATTERN, target_tag

SPLITS = ("train", "val", "test", "test2016", "test2017", "mscoco2017", "test2018")
MULTI30K_LANGUAGES = ("de", "en", "fr", "cs")  # task 1 as mt ships it: line i is one sentence in all four
# The keys of a data.corpora entry that only the translated sources (backtranslation,
# distillation) read, and those they never read.
TRANSLATION_KEYS = ("run", "ensemble", "engine", "text", "side", "decode", "min_score", "cache_dir")
# What a translated corpus's decode block may set: the rest is the entry's to say (its languages)
# or means nothing for a corpus (alignments; scores are always kept).
CORPUS_DECODE_KEYS = ("beam", "length_penalty", "n_best", "sampling")
_SOURCE_KEYS = ("files", "tables", "columns", "hub", "hub_config", "hub_splits")
_LANGUAGE = re.compile(r"[a-z]{2,3}([_-][A-Za-z0-9]+)*")


def _check_share(key: str, value: float, what: str) -> None:
    require(0.0 <= value <= 1.0, f"{key}={value} must be {what}, from 0 to 1")


def check_data(d: DataConfig) -> None:
    require(d.src_lang != d.tgt_lang, f"data.src_lang and data.tgt_lang are both {d.src_lang!r}")
    require(d.max_len >= 2, f"data.max_len={d.max_len} must be at least 2")
    require(d.train_limit is None or d.train_limit > 0, f"data.train_limit={d.train_limit} must be positive")
    require(
        d.max_length_ratio is None or d.max_length_ratio >= 1,
        f"data.max_length_ratio={d.max_length_ratio} must be at least 1 (or null: no ratio filter)",
    )
    require(d.workers >= 0, f"data.workers={d.workers} must be 0 (the training process) or more")
    _check_share("data.placeholders", d.placeholders, "a share of the training pairs")
    require(
        0.0 < d.terms_share <= 1.0,
        f"data.terms_share={d.terms_share} must be a share of the dictionary's matches, over 0 and at most 1",
    )
    _check_share("data.terms_hidden", d.terms_hidden, "a share of the annotated terms")
    _check_share("data.concat", d.concat, "a probability")
    splits = ", ".join(SPLITS)
    require(d.test_split in SPLITS, f"data.test_split={d.test_split!r} is not valid; choose one of {splits}")
    entries = d.entries()
    target_tags = {target_tag(lang) for lang in d.languages()[1]}
    for index, entry in enumerate(entries):
        _check_corpus(entry, f"data.corpora[{index}]." if d.corpora else "data.", target_tags)
    for index, entry in enumerate(d.corpora):  # as written: entries() fills in dir
        prefix = f"data.corpora[{index}]."
        require(
            entry.max_length_ratio is None or entry.max_length_ratio >= 1,
            f"{prefix}max_length_ratio={entry.max_length_ratio} must be at least 1 (or null: "
            "data.max_length_ratio)",
        )
        if entry.concat is not None:  # null: data.concat's
            _check_share(f"{prefix}concat", entry.concat, "a probability")
        _check_translated(entry, prefix, first=index == 0)
        _check_suggestions(entry, prefix, first=index == 0)
    if d.corpora:
        _check_single_source_unset(d)
        first = entries[0]
        require(
            (first.src_lang, first.tgt_lang) == (d.src_lang, d.tgt_lang),
            f"data.corpora[0] translates {first.src_lang}->{first.tgt_lang} but data.src_lang and "
            f"data.tgt_lang say {d.src_lang}->{d.tgt_lang}: the first corpus is the run's direction (its "
            "validation picks best.pt); reorder data.corpora or change data.src_lang/tgt_lang",
        )


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
        + (", backtranslation, distillation, suggestions" if p != "data." else ""),
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
            TAG_PATTERN.fullmatch(c.tag) is not None and c.tag not in SPECIAL_PIECES,
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
    """The keys of the translated sources (text translated by other runs), on those sources only,
    and the keys of other sources never on them."""
    given = _given(c)
    if not c.translated:
        extra = next((key for key in given if key in TRANSLATION_KEYS), None)
        require(
            extra is None,
            f"{p}{extra} is a key of source=backtranslation and source=distillation; remove it or set "
            f"{p}source to one of them",
        )
        return
    source = f"source={c.source}"
    require(
        not first,
        f"{p}{source} cannot come first: the first corpus gives the run's validation; "
        "put a corpus of real pairs first",
    )
    extra = next((key for key in given if key in ("dir", *_SOURCE_KEYS)), None)
    require(extra is None, f"{p}{extra} has no meaning for {source}; remove it")
    require(
        c.source != "distillation" or "side" not in given,
        f"{p}side has no meaning for source=distillation: its text is always the source side, the "
        "teacher's translation the target; remove it",
    )
    require(
        c.run is not None and bool(c.run.strip()),
        f"{p}{source} needs {p}run: the run whose model translates the text (RUN or RUN:CHECKPOINT)",
    )
    require(
        all(member.strip() for member in c.ensemble),
        f"{p}ensemble has an empty entry; give RUN or RUN:CHECKPOINT",
    )
    require(
        c.engine == "mt" or not c.ensemble,
        f"{p}ensemble needs engine: mt (CTranslate2 has no ensembles); remove {p}ensemble or {p}engine",
    )
    require(
        bool(c.text) and all(path.strip() for path in c.text),
        f"{p}{source} needs {p}text: [file, ...], one sentence per line",
    )
    require(c.cache_dir is None or bool(c.cache_dir.strip()), f"{p}cache_dir is empty; give a directory")
    require(
        c.min_score is None or (math.isfinite(c.min_score) and c.min_score <= 0),
        f"{p}min_score={c.min_score} must be a log-probability per piece: 0 or below (e.g. -1.5), or "
        "null to keep every pair",
    )
    if c.decode is not None:  # its values checked themselves as they were read (config.options)
        extra = next((key for key in _given(c.decode) if key not in CORPUS_DECODE_KEYS), None)
        require(
            extra is None,
            f"{p}decode.{extra} has no meaning for a translated corpus; it may set "
            f"{', '.join(CORPUS_DECODE_KEYS)}",
        )
        # Sequence-level distillation learns the teacher's most probable translation (Kim and Rush
        # 2016); a sample teaches the student the teacher's noise on the side it learns to write.
        require(
            c.source != "distillation" or c.decode.sampling is None,
            f"{p}decode.sampling: distillation learns the teacher's beam search, not its samples; "
            "remove it (sampled forward translation: source: backtranslation with side: source)",
        )


def _check_suggestions(c: CorpusConfig, p: str, first: bool) -> None:
    """``database``, the one key of ``source: suggestions``, on that source only; no key of
    another source on it; never first, since it has no validation split."""
    if c.source != "suggestions":
        require(
            c.database is None,
            f"{p}database is a key of source=suggestions; remove it or set {p}source: suggestions",
        )
        return
    require(
        not first,
        f"{p}source=suggestions cannot come first: the first corpus gives the run's validation; "
        "put a corpus of real pairs first",
    )
    extra = next((key for key in _given(c) if key in ("dir", *_SOURCE_KEYS)), None)
    require(extra is None, f"{p}{extra} has no meaning for source=suggestions; remove it")
    require(
        c.database is not None and bool(c.database.strip()),
        f"{p}source=suggestions needs {p}database: the SQLite file `mt serve --suggestions` writes",
    )


def _given(section: object) -> list[str]:
    """The fields of a dataclass instance that differ from their defaults."""
    return [f.name for f in dataclasses.fields(section) if getattr(section, f.name) != _default(f)]


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
