"""From a config to what training needs: the corpus, both tokenizers and encoded pairs."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mt_cli.checkpoint import RunDir
from mt_cli.config import Config
from mt_cli.corpus import load_corpus
from mt_cli.data import (
    encode_split,
    encoded_lists,
    filter_long,
    pair_widths,
    source_ids,
    target_ids,
    within_max_len,
)
from mt_cli.distributed import Distributed
from mt_cli.errors import InputError
from mt_cli.tokenizer import Tokenizer, load_tokenizers, prepare_tokenizers

if TYPE_CHECKING:
    import datasets


@dataclass
class TrainingData:
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    train_src: list[list[int]]  # source ids + EOS
    train_tgt: list[list[int]]  # BOS + target ids + EOS
    train_text: tuple[list[str], list[str]]  # the same pairs as text, for BPE-dropout to re-encode
    val_src: list[str]  # raw text: validation is scored like any user input
    val_ref: list[str]
    test_src: list[str]
    test_ref: list[str]

    def segment_with_dropout(
        self, src_dropout: float, tgt_dropout: float, seed: int, max_len: int
    ) -> tuple[list[list[int]], list[list[int]]]:
        """The training pairs re-encoded with BPE-dropout, as (source ids, target ids) lists.

        A side with dropout 0 keeps its fixed ids. Dropped merges lengthen a sentence; a pair
        that would grow past ``max_len`` pieces on either side keeps its fixed ids, so the set
        of trained pairs never changes.
        """
        src_text, tgt_text = self.train_text
        src_ids = (
            [source_ids(p) for p in self.src_tok.encode_with_dropout(src_text, src_dropout, seed)]
            if src_dropout
            else list(self.train_src)
        )
        tgt_ids = (
            [target_ids(p) for p in self.tgt_tok.encode_with_dropout(tgt_text, tgt_dropout, seed + 1)]
            if tgt_dropout
            else list(self.train_tgt)
        )
        src_widths, tgt_widths = pair_widths(src_ids, tgt_ids)
        for i, (src_width, tgt_width) in enumerate(zip(src_widths, tgt_widths, strict=True)):
            if not within_max_len(src_width, tgt_width, max_len):
                src_ids[i], tgt_ids[i] = self.train_src[i], self.train_tgt[i]
        return src_ids, tgt_ids


def tokenizers_for(
    cfg: Config, run: RunDir, corpus: datasets.DatasetDict, dist: Distributed, log: Callable[[str], None]
) -> tuple[Tokenizer, Tokenizer]:
    """Train (rank 0) or reuse the two tokenizers; other ranks wait, then load them."""
    if dist.is_main:
        train = corpus["train"]
        frozen = bool(run.previous_training())
        tokenizers = prepare_tokenizers(cfg, run.root, train["src"], train["tgt"], log=log, frozen=frozen)
    dist.barrier()
    if not dist.is_main:
        tokenizers = load_tokenizers(run.root, cfg.data.src_lang, cfg.data.tgt_lang)
    return tokenizers


def prepare_training_data(
    cfg: Config, run: RunDir, dist: Distributed, log: Callable[[str], None]
) -> TrainingData:
    import datasets

    datasets.disable_progress_bars()  # our own log says what is being prepared
    splits = ["train", "val", cfg.data.test_split]
    corpus = load_corpus(cfg.data, splits)
    log(" | ".join(f"{name}: {len(corpus[name]):,} pairs" for name in splits))
    src_tok, tgt_tok = tokenizers_for(cfg, run, corpus, dist, log)
    train = encode_split(corpus["train"], src_tok, tgt_tok)
    train, dropped = filter_long(train, cfg.data.max_len)
    if dropped:
        log(f"dropped {dropped:,} training pairs longer than data.max_len={cfg.data.max_len} pieces")
    # Plain lists: indexing a datasets Column goes through Arrow (~40 us a row) on the hot path.
    train_src, train_tgt = encoded_lists(train)
    text = train.select_columns(["src", "tgt"]).to_dict()
    val, test = corpus["val"].to_dict(), corpus[cfg.data.test_split].to_dict()
    return TrainingData(
        src_tok=src_tok,
        tgt_tok=tgt_tok,
        train_src=train_src,
        train_tgt=train_tgt,
        train_text=(text["src"], text["tgt"]),
        val_src=val["src"],
        val_ref=val["tgt"],
        test_src=test["src"],
        test_ref=test["tgt"],
    )


def describe_preparation(cfg: Config, run_dir: Path, log: Callable[[str], None]) -> list[str]:
    """``mt prepare``: load every split, train or reuse the tokenizers, and report on both.

    A run directory this call created is removed again if it fails or is interrupted.
    """
    from tqdm import tqdm

    from mt_cli.tokenizer import tokenizer_stats

    run = RunDir(run_dir)
    if run.root.exists() and not run.root.is_dir():
        raise InputError(f"run directory {run.root} is a file; give a directory for --run")
    with tqdm(total=3, desc="prepare", unit="stage", leave=False, disable=None) as bar:
        bar.set_postfix_str("corpus")
        corpus = load_corpus(cfg.data)
        bar.update()
        bar.set_postfix_str("tokenizers")
        created = not run.root.exists()
        run.root.mkdir(parents=True, exist_ok=True)
        try:
            src_tok, tgt_tok = tokenizers_for(cfg, run, corpus, Distributed(), log)
        except BaseException:
            if created:
                shutil.rmtree(run.root, ignore_errors=True)
            raise
        bar.update()
        bar.set_postfix_str("statistics")
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
        bar.update()
    lines.append(f"tokenizers: {run.root}/spm.{src_tok.lang}.model, {run.root}/spm.{tgt_tok.lang}.model")
    return lines
