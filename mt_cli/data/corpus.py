"""Where the parallel text comes from: Multi30k (a local copy, the one mt ships, or the hub) or any files.

A run reads one corpus or several (``DataConfig.entries()``); each is a ``CorpusConfig``, and
the functions here take one, or a data section, meaning: its training pairs, all corpora one
after another (``train_pairs``, ``train_fingerprint``), or its first corpus, which gives
validation and test (``load_corpus``). Evaluation splits come back as a ``datasets.DatasetDict``
with ``src`` and ``tgt`` text columns, one dataset per split (names in ``data_rules.SPLITS``).
``datasets`` is imported inside the functions that need it, so reading a text file does not pay for it.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mt_cli.config.data_rules import SPLITS
from mt_cli.config.sections import CorpusConfig, DataConfig
from mt_cli.data import suggestions, synthetic
from mt_cli.data.filters import Filtered
from mt_cli.data.formats import Pair, decoded, hub_pairs, table_pairs
from mt_cli.disk.reading import open_bytes, utf16_refusal
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.errors import DataError

if TYPE_CHECKING:
    import datasets

HUB_DATASET = "bentrevett/multi30k"
HUB_SPLIT_NAMES = {"train": "train", "val": "validation", "test": "test"}  # for source=hub by default
_HUB_SPLITS = {"train": "train", "validation": "val", "test": "test2016"}
# Our split name -> file stem of the official raw Multi30k task-1 files.
MULTI30K_FILES = {
    "train": "train",
    "val": "val",
    "test2016": "test_2016_flickr",
    "test2017": "test_2017_flickr",
    "mscoco2017": "test_2017_mscoco",
    "test2018": "test_2018_flickr",
}


def _local_multi30k(directory: Path, src_lang: str, tgt_lang: str) -> dict[str, tuple[Path, Path]]:
    """Split -> (source file, target file) for every split with both sides present."""

    def find(stem: str, lang: str) -> Path | None:
        paths = [directory / f"{stem}.{lang}.gz", directory / f"{stem}.{lang}"]
        return next((p for p in paths if p.is_file()), None)

    found = {}
    for split, stem in MULTI30K_FILES.items():
        src, tgt = find(stem, src_lang), find(stem, tgt_lang)
        if src is not None and tgt is not None:
            found[split] = (src, tgt)
    return found


def _load_hub(src_lang: str, tgt_lang: str) -> dict[str, tuple[list[str], list[str]]]:
    """Multi30k from the Hugging Face hub; raises OSError/ValueError when it cannot be had."""
    import datasets

    dd = datasets.load_dataset(HUB_DATASET)
    return {
        ours: (list(dd[theirs][src_lang]), list(dd[theirs][tgt_lang]))
        for theirs, ours in _HUB_SPLITS.items()
        if theirs in dd
    }


def _multi30k_location(cfg: CorpusConfig) -> tuple[str, Path | None]:
    """(how it was chosen, directory) of the Multi30k copy to read; directory None means the hub.

    Order: ``data.dir``, then ``$MT_DATA_DIR``, then the copy that ships with mt (when it has
    both languages), then the Hugging Face hub.
    """
    if cfg.dir is not None:
        return f"data.dir={cfg.dir}", Path(cfg.dir)
    if os.environ.get("MT_DATA_DIR"):
        return f"MT_DATA_DIR={os.environ['MT_DATA_DIR']}", Path(os.environ["MT_DATA_DIR"])
    if _local_multi30k(SHIPPED_MULTI30K, cfg.src_lang, cfg.tgt_lang):
        return f"the copy shipped with mt ({SHIPPED_MULTI30K})", SHIPPED_MULTI30K
    return f"the hub ({HUB_DATASET})", None


def _split_files(cfg: CorpusConfig) -> tuple[str, dict[str, tuple[Path, Path]] | None]:
    """(where the corpus is, split -> (source file, target file)); None for the hub."""
    if cfg.source == "files":
        return "data.files", {split: (Path(pair[0]), Path(pair[1])) for split, pair in cfg.files.items()}
    src, tgt = cfg.src_lang, cfg.tgt_lang
    where, directory = _multi30k_location(cfg)
    if directory is None:
        return where, None
    files = _local_multi30k(directory, src, tgt) if directory.is_dir() else {}
    if not files:
        # An explicitly named location that is wrong is an error, not a cue to fall back:
        # silently training on another copy (or downloading one) would hide the typo.
        raise DataError(
            f"Multi30k not found in {where}: no train.{src}[.gz] / train.{tgt}[.gz] there; "
            "set data.dir or MT_DATA_DIR to a directory with the raw Multi30k files, "
            "or unset both to use the copy shipped with mt"
        )
    return where, files


def _stream_pair(src_path: Path, tgt_path: Path) -> Iterator[Pair]:
    """Two parallel text files, line by line; a side that is not UTF-8 comes as None."""
    with open_bytes(src_path) as src, open_bytes(tgt_path) as tgt:
        for count, pair in enumerate(itertools.zip_longest(src, tgt)):
            if pair[0] is None or pair[1] is None:
                longer, shorter = (src_path, tgt_path) if pair[1] is None else (tgt_path, src_path)
                raise DataError(
                    f"line counts differ: {shorter} ends after {count:,} lines, {longer} goes on; "
                    "parallel files need one sentence per line on both sides"
                )
            if count == 0:
                _refuse_utf16(pair, (src_path, tgt_path))
                pair = tuple(raw.removeprefix(b"\xef\xbb\xbf") for raw in pair)
            yield decoded(pair[0].rstrip(b"\r\n")), decoded(pair[1].rstrip(b"\r\n"))


def _refuse_utf16(first_lines: tuple[bytes, bytes], paths: tuple[Path, Path]) -> None:
    """A DataError for a side whose first line shows it is UTF-16 (its pairs would be garbage)."""
    for line, path in zip(first_lines, paths):
        if refusal := utf16_refusal(line, str(path)):
            raise DataError(refusal)


def _streams(
    cfg: CorpusConfig, dropped: Filtered | None = None
) -> tuple[str, dict[str, Callable[[], Iterator[Pair]]]]:
    """(where the corpus is, split -> a function that streams its pairs) for every split it has;
    a translated corpus's pairs under its ``min_score`` are counted in ``dropped`` (if given)."""
    if cfg.source == "table":
        return "data.tables", {
            split: functools.partial(table_pairs, paths, cfg.columns) for split, paths in cfg.tables.items()
        }
    if cfg.translated:  # made by train.backtranslation before the data is read
        made = synthetic.resolve(cfg)
        made.provenance()  # a DataError if they are not made yet
        return f"the synthetic pairs {made.directory}", {
            "train": functools.partial(
                _scored_pairs, made, cfg.min_score, Filtered() if dropped is None else dropped
            )
        }
    if cfg.source == "suggestions":  # what users of `mt serve --suggestions` corrected
        database = suggestions.database(cfg)
        return f"the suggestions database {database}", {
            "train": functools.partial(suggestions.suggestion_pairs, database, cfg.src_lang, cfg.tgt_lang)
        }
    if cfg.source == "hub":
        names = cfg.hub_splits or HUB_SPLIT_NAMES
        return f"the hub dataset {cfg.hub}", {
            split: functools.partial(hub_pairs, cfg.hub, cfg.hub_config, theirs, cfg.columns)
            for split, theirs in names.items()
        }
    where, files = _split_files(cfg)
    if files is None:
        pairs = _hub_pairs(cfg.src_lang, cfg.tgt_lang)
        return where, {split: functools.partial(zip, *pairs[split]) for split in pairs}
    return where, {split: functools.partial(_stream_pair, *paths) for split, paths in files.items()}


def _scored_pairs(made: synthetic.Synthetic, min_score: float | None, dropped: Filtered) -> Iterator[Pair]:
    """A translated corpus's pairs whose teacher's score is at least ``min_score`` (None: every
    pair); the others are counted in ``dropped.score``."""
    pairs = _stream_pair(*made.files())
    if min_score is None:
        yield from pairs
        return
    try:
        for pair, score in zip(pairs, made.scores(), strict=True):
            if score >= min_score:
                yield pair
            else:
                dropped.score += 1
    except ValueError as err:  # zip's: the files' lengths differ
        raise DataError(
            f"the synthetic pairs {made.directory} are damaged ({err}); delete the folder and run again"
        ) from None


def _evaluation_corpus(cfg: DataConfig | CorpusConfig) -> CorpusConfig:
    """A corpus as given, or a data section's first: the one validation and test come from."""
    return cfg.entries()[0] if isinstance(cfg, DataConfig) else cfg


def train_pairs(cfg: DataConfig | CorpusConfig, dropped: Filtered | None = None) -> Iterator[Pair]:
    """The training pairs as a stream (at most ``train_limit`` per corpus; of a translated corpus,
    the pairs of its first ``train_limit`` lines of text), read from disk as they are needed; of a
    data section, every corpus's, one corpus after another (untagged). ``dropped`` counts the
    pairs a translated corpus's ``min_score`` leaves out.

    A side that is not UTF-8 comes as None: the filters drop the pair and count it.
    """
    if isinstance(cfg, DataConfig):
        return itertools.chain.from_iterable(train_pairs(entry, dropped) for entry in cfg.entries())
    where, streams = _streams(cfg, dropped)
    if "train" not in streams:
        raise DataError(f"split train is not in the corpus from {where}")
    return itertools.islice(streams["train"](), None if cfg.translated else cfg.train_limit)


def train_fingerprint(cfg: DataConfig | CorpusConfig) -> dict:
    """What identifies the training text without reading it: the files' paths, sizes and
    modification times (as ``make`` and Hugging Face ``datasets`` decide), or the hub's name.

    A data section of one corpus has that corpus's; one of several lists theirs, with their
    languages (a hub's Multi30k names none).
    """
    if isinstance(cfg, DataConfig):
        entries = cfg.entries()
        if len(entries) == 1:
            return train_fingerprint(entries[0])
        return {
            "corpora": [
                {"src_lang": c.src_lang, "tgt_lang": c.tgt_lang, **train_fingerprint(c)} for c in entries
            ]
        }
    if cfg.translated:
        return synthetic.fingerprint(cfg)
    if cfg.source == "suggestions":  # a database grows in place: its rows, not its file's time
        database = suggestions.database(cfg)
        return {
            **suggestions.fingerprint(database, cfg.src_lang, cfg.tgt_lang),
            "train_limit": cfg.train_limit,
        }
    if cfg.source == "hub":
        hub = {"hub": cfg.hub, "config": cfg.hub_config, "splits": cfg.hub_splits, "columns": cfg.columns}
        return {**hub, "train_limit": cfg.train_limit}
    if cfg.source == "table":
        paths, extra = [Path(p) for p in cfg.tables["train"]], {"columns": cfg.columns}
    else:
        where, files = _split_files(cfg)
        if files is None or "train" not in files:
            return {"corpus": where, "train_limit": cfg.train_limit}
        paths, extra = list(files["train"]), {}
    stats = [(path.resolve(), path.stat()) for path in paths]
    return {
        "files": [[str(path), stat.st_size, stat.st_mtime_ns] for path, stat in stats],
        "train_limit": cfg.train_limit,
        **extra,
    }


def _hub_pairs(src: str, tgt: str) -> dict[str, tuple[list[str], list[str]]]:
    if {src, tgt} != {"de", "en"}:
        raise DataError(
            f"the hub copy of Multi30k ({HUB_DATASET}) has only de and en, not {src}->{tgt}; "
            "set data.dir or MT_DATA_DIR to a directory with the raw Multi30k files"
        )
    try:
        return _load_hub(src, tgt)
    except (OSError, ValueError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(
            "Multi30k not found: data.dir and MT_DATA_DIR are not set, the copy shipped with mt "
            f"({SHIPPED_MULTI30K}) is missing, and the Hugging Face hub ({HUB_DATASET}) failed ({reason}); "
            "set data.dir or MT_DATA_DIR to a directory with the raw Multi30k files "
            "(train.de.gz, train.en.gz, val.*, test_2016_flickr.*)"
        ) from None


def load_corpus(cfg: DataConfig | CorpusConfig, splits: Sequence[str] | None = None) -> datasets.DatasetDict:
    """Text pairs (columns ``src``, ``tgt``) per split, in the direction cfg.src_lang -> tgt_lang,
    of a corpus or of a data section's first (``_evaluation_corpus``).

    ``splits=None`` loads every split the source has; otherwise only those named (a missing
    one is a DataError listing the available ones). ``cfg.train_limit`` keeps the first N
    training pairs. Lines are never stripped or dropped here, so text that is not UTF-8 is an error.
    """
    import datasets

    cfg = _evaluation_corpus(cfg)
    if splits is not None:
        unknown = [s for s in splits if s not in SPLITS]
        if unknown:
            raise DataError(f"unknown split {unknown[0]!r}; choose from {', '.join(SPLITS)}")
    if (cfg.translated or cfg.source == "suggestions") and splits is not None and set(splits) - {"train"}:
        raise DataError(f"a {cfg.source} corpus has training pairs only, no val or test split")
    where, streams = _streams(cfg)
    wanted = list(streams) if splits is None else list(splits)
    missing = [s for s in wanted if s not in streams]
    if missing:
        names = ", ".join(s for s in SPLITS if s in streams) or "none"
        raise DataError(f"split {missing[0]} is not in the corpus from {where}; available: {names}")
    columns = {}
    for split in (s for s in SPLITS if s in wanted):
        pairs = list(train_pairs(cfg) if split == "train" else streams[split]())
        bad = next((row for row, pair in enumerate(pairs, start=1) if None in pair), None)
        if bad is not None:
            raise DataError(
                f"split {split} from {where}: pair {bad} is not UTF-8; convert it, e.g. with iconv"
            )
        columns[split] = datasets.Dataset.from_dict(
            {"src": [s for s, _ in pairs], "tgt": [t for _, t in pairs]}
        )
    return datasets.DatasetDict(columns)
