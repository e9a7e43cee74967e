"""From a config to what training reads: the splits, and the training pairs encoded once.

Whoever runs several processes decides which one trains the tokenizers (``train.run``); this
module only loads, encodes and filters, and reports on it for ``mt prepare``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mt_cli.config import Config
from mt_cli.data.corpus import load_corpus
from mt_cli.data.dataset import (
    EncodedPairs,
    FixedPairs,
    PairSource,
    ResegmentedPairs,
    encode_pairs,
    short_enough,
)
from mt_cli.text.tokenizer import Tokenizer, tokenizer_stats

if TYPE_CHECKING:
    import datasets


@dataclass(frozen=True)
class TrainingData:
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    train: PairSource  # the training pairs, per epoch
    val_src: list[str]  # raw text: validation is scored like any user input
    val_ref: list[str]
    test_src: list[str]
    test_ref: list[str]


def load_training_splits(cfg: Config, log: Callable[[str], None]) -> datasets.DatasetDict:
    """The train, val and test splits of the configured corpus."""
    import datasets

    datasets.disable_progress_bars()  # our own log says what is being prepared
    splits = ["train", "val", cfg.data.test_split]
    corpus = load_corpus(cfg.data, splits)
    log(" | ".join(f"{name}: {len(corpus[name]):,} pairs" for name in splits))
    return corpus


def training_data(
    cfg: Config,
    corpus: datasets.DatasetDict,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    log: Callable[[str], None],
) -> TrainingData:
    """Encode the training pairs, drop those longer than ``data.max_len`` (counted in the log)."""
    # Plain lists: indexing a datasets column goes through Arrow (~40 us a row).
    text = corpus["train"].to_dict()
    src_text, tgt_text = text["src"], text["tgt"]
    fixed = encode_pairs(src_text, tgt_text, src_tok, tgt_tok)
    kept = short_enough(fixed, cfg.data.max_len)
    if len(kept) < len(fixed):
        log(
            f"dropped {len(fixed) - len(kept):,} training pairs longer than "
            f"data.max_len={cfg.data.max_len} pieces"
        )
    tok = cfg.tokenizer
    train: PairSource
    if tok.src_bpe_dropout or tok.tgt_bpe_dropout:
        kept_src, kept_tgt = [src_text[i] for i in kept], [tgt_text[i] for i in kept]
        dropout = (tok.src_bpe_dropout, tok.tgt_bpe_dropout)
        train = ResegmentedPairs(kept_src, kept_tgt, src_tok, tgt_tok, *dropout, cfg.data.max_len)
    else:
        train = FixedPairs(EncodedPairs([fixed.src[i] for i in kept], [fixed.tgt[i] for i in kept]))
    val, test = corpus["val"].to_dict(), corpus[cfg.data.test_split].to_dict()
    return TrainingData(src_tok, tgt_tok, train, val["src"], val["tgt"], test["src"], test["tgt"])


def describe_corpus(corpus: datasets.DatasetDict, src_tok: Tokenizer, tgt_tok: Tokenizer) -> list[str]:
    """``mt prepare``'s report: pairs per split, and per tokenizer its coverage on train and val."""
    lines = [" | ".join(f"{name}: {len(split):,} pairs" for name, split in corpus.items())]
    for tok, column in ((src_tok, "src"), (tgt_tok, "tgt")):
        for split in ("train", "val"):
            if split not in corpus:
                continue
            stats = tokenizer_stats(tok, corpus[split][column])
            lines.append(
                f"{tok.lang} {split}: vocab {stats['vocab_size']:,} | coverage {stats['coverage']:.4%} | "
                f"{stats['pieces_per_sentence']:.1f} pieces per sentence"
            )
    return lines
