"""From a config to what training reads: the evaluation splits, a sample for the tokenizers, and
the training pairs encoded once into a prepared corpus on disk.

Whoever runs several processes decides which one trains the tokenizers and writes the prepared
corpus (``train.run``); this module loads, samples, encodes and filters, and reports on it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mt_cli.config import Config
from mt_cli.data.corpus import load_corpus, train_fingerprint, train_pairs
from mt_cli.data.filters import Filtered, PairFilter
from mt_cli.data.prepared import PreparedCorpus, prepared_key, write_prepared
from mt_cli.files import batched, file_sha256
from mt_cli.layout import RunDir
from mt_cli.text.tokenizer import Tokenizer, tokenizer_path, tokenizer_stats

if TYPE_CHECKING:
    import datasets

ENCODE_CHUNK = 50_000  # pairs encoded per SentencePiece call (it spreads them over every core)
SAMPLE_SEED = 0  # the tokenizers' sample does not change with train.seed: runs share tokenizers


@dataclass(frozen=True)
class TrainingData:
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    train: PreparedCorpus  # the training pairs, on disk
    val_src: list[str]  # raw text: validation is scored like any user input
    val_ref: list[str]
    test_src: list[str]
    test_ref: list[str]


def load_eval_splits(cfg: Config, log: Callable[[str], None]) -> datasets.DatasetDict:
    """The val and test splits of the configured corpus (training pairs are streamed instead)."""
    import datasets

    datasets.disable_progress_bars()  # our own log says what is being prepared
    splits = ["val", cfg.data.test_split]
    corpus = load_corpus(cfg.data, splits)
    log(" | ".join(f"{name}: {len(corpus[name]):,} pairs" for name in splits))
    return corpus


def tokenizer_sample(cfg: Config) -> tuple[list[str], list[str]]:
    """At most ``tokenizer.sample_sentences`` training pairs, drawn uniformly in one pass over the
    stream (reservoir sampling) and kept in corpus order; a smaller corpus is taken whole."""
    size = cfg.tokenizer.sample_sentences
    rng = random.Random(SAMPLE_SEED)
    reservoir: list[tuple[int, tuple[str, str]]] = []
    decodable = (pair for pair in train_pairs(cfg.data) if None not in pair)
    for index, pair in enumerate(decodable):
        if index < size:
            reservoir.append((index, pair))
        elif (slot := rng.randrange(index + 1)) < size:
            reservoir[slot] = (index, pair)
    reservoir.sort(key=lambda item: item[0])
    return [src for _, (src, _) in reservoir], [tgt for _, (_, tgt) in reservoir]


def prepared_recipe(cfg: Config, run_root: Path) -> dict:
    """What a prepared corpus is made from: a change to any of it makes a new one."""
    return {
        "train": train_fingerprint(cfg.data),
        "max_len": cfg.data.max_len,
        "max_length_ratio": cfg.data.max_length_ratio,
        "dedupe": cfg.data.dedupe,
        "tokenizers": {
            side: file_sha256(tokenizer_path(run_root, lang))
            for side, lang in (("src", cfg.data.src_lang), ("tgt", cfg.data.tgt_lang))
        },
    }


def prepared_directory(cfg: Config, run_root: Path, recipe: dict) -> Path:
    root = Path(cfg.data.prepared_dir) if cfg.data.prepared_dir is not None else RunDir(run_root).prepared
    return root / prepared_key(recipe)


def prepare_corpus(
    cfg: Config, run_root: Path, src_tok: Tokenizer, tgt_tok: Tokenizer, log: Callable[[str], None]
) -> PreparedCorpus:
    """The prepared corpus of this config and these tokenizers: reused, or written first."""
    from tqdm import tqdm

    recipe = prepared_recipe(cfg, run_root)
    directory = prepared_directory(cfg, run_root, recipe)
    if directory.exists():
        corpus = PreparedCorpus.open(directory)
        log(f"prepared corpus: reusing {directory} ({len(corpus):,} pairs)")
        return corpus
    log(f"prepared corpus: encoding the training pairs into {directory}")
    pairs = batched(train_pairs(cfg.data), ENCODE_CHUNK)
    chunks = (([src for src, _ in chunk], [tgt for _, tgt in chunk]) for chunk in pairs)
    with tqdm(desc="encode", unit=" pairs", leave=False, disable=None) as bar:
        corpus = write_prepared(directory, chunks, src_tok, tgt_tok, pair_filter(cfg), recipe, bar.update)
    manifest = corpus.manifest
    dropped = Filtered(**manifest["dropped"]).describe()
    log(f"train: {manifest['read']:,} pairs read, {len(corpus):,} kept; dropped: {dropped}")
    return corpus


def pair_filter(cfg: Config) -> PairFilter:
    return PairFilter(cfg.data.max_len, cfg.data.max_length_ratio, cfg.data.dedupe)


def training_data(
    cfg: Config,
    splits: datasets.DatasetDict,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    train: PreparedCorpus,
) -> TrainingData:
    """What the trainer reads: the prepared training pairs and the raw val and test text."""
    val, test = splits["val"].to_dict(), splits[cfg.data.test_split].to_dict()
    return TrainingData(src_tok, tgt_tok, train, val["src"], val["tgt"], test["src"], test["tgt"])


def describe_corpus(
    sections: dict[str, tuple[list[str], list[str]]], src_tok: Tokenizer, tgt_tok: Tokenizer
) -> list[str]:
    """``mt prepare``'s report: pairs per section, and per tokenizer its coverage on each."""
    lines = [" | ".join(f"{name}: {len(src):,} pairs" for name, (src, _) in sections.items())]
    for side, tok in enumerate((src_tok, tgt_tok)):
        for name, texts in sections.items():
            stats = tokenizer_stats(tok, list(texts[side]))
            lines.append(
                f"{tok.lang} {name}: vocab {stats['vocab_size']:,} | coverage {stats['coverage']:.4%} | "
                f"{stats['pieces_per_sentence']:.1f} pieces per sentence"
            )
    return lines
