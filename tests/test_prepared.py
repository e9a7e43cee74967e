"""The prepared corpus: encoded once into memory-mapped arrays, filtered and counted, reused only
when nothing it was made from changed, never half-written."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import CONFIGS, FAST_TRAINING, TinyCorpus, quiet

from mt_cli.config.recipe import load_config
from mt_cli.config.sections import Config
from mt_cli.data.batch import source_ids, target_ids
from mt_cli.data.corpus import train_pairs
from mt_cli.data.dataset import encode_pairs, short_enough
from mt_cli.data.filters import Filtered, PairFilter
from mt_cli.data.prepare import (
    prepare_corpus,
    prepared_directory,
    prepared_recipe,
)
from mt_cli.data.prepared import MANIFEST, PreparedCorpus, write_prepared
from mt_cli.disk.reading import read_lines
from mt_cli.errors import CheckpointError, DataError, RunFailure


def tiny(*overrides: str) -> Config:
    return load_config(CONFIGS / "tiny.yaml", [*FAST_TRAINING, *overrides])


def prepare(tiny_corpus: TinyCorpus, cfg: Config, log=quiet) -> PreparedCorpus:
    return prepare_corpus(cfg, tiny_corpus.root, tiny_corpus.src_tok, tiny_corpus.tgt_tok, log)


def test_the_arrays_hold_the_pairs_encoded_in_memory(tiny_corpus: TinyCorpus) -> None:
    cfg = tiny()
    corpus = prepare(tiny_corpus, cfg)
    src, tgt = zip(*train_pairs(cfg.data), strict=True)
    encoded = encode_pairs(list(src), list(tgt), tiny_corpus.src_tok, tiny_corpus.tgt_tok)
    kept = short_enough(encoded, cfg.data.max_len)
    assert len(corpus) == len(kept) == corpus.manifest["pairs"]
    assert corpus.manifest["read"] == cfg.data.train_limit
    assert [source_ids(corpus.pieces("src", i)) for i in range(len(corpus))] == [encoded.src[i] for i in kept]
    assert [target_ids(corpus.pieces("tgt", i)) for i in range(len(corpus))] == [encoded.tgt[i] for i in kept]
    widths = corpus.widths()
    assert widths[0].tolist() == [len(encoded.src[i]) for i in kept]
    assert widths[1].tolist() == [len(encoded.tgt[i]) - 1 for i in kept]
    assert corpus.dtypes["src"] == np.uint16  # a vocabulary under 65,536 pieces
    assert [corpus.text("src", i) for i in range(len(corpus))] == [src[i] for i in kept]
    assert [corpus.text("tgt", i) for i in range(len(corpus))] == [tgt[i] for i in kept]
    batch = corpus.collate([3, 0, 7])
    assert torch.equal(batch.src[1, : len(encoded.src[kept[0]])], torch.tensor(encoded.src[kept[0]]))


def test_filters_drop_and_count_each_pair_once() -> None:
    pieces = {"ok": [5, 6], "long": [5] * 9, "skewed": [5] * 7, "one": [5]}
    src = [pieces["ok"], pieces["long"], pieces["one"], pieces["ok"], pieces["one"]]
    tgt = [pieces["ok"], pieces["ok"], pieces["skewed"], [], pieces["one"]]
    texts = [("a b", "a b"), ("long", "x"), ("a", "skewed"), ("a b", " "), ("a", "a")]
    counts = Filtered()
    keep = PairFilter(max_len=8, max_ratio=3.0).keep(src, tgt, texts, counts)
    assert keep.tolist() == [True, False, False, False, True]
    assert counts.as_dict() == {
        "undecodable": 0,
        "empty": 1,
        "too_long": 1,
        "ratio": 1,
        "duplicate": 0,
        "score": 0,
    }
    counts = Filtered()
    assert PairFilter(max_len=8, max_ratio=None).keep(src, tgt, texts, counts).tolist()[2] is True


def test_a_second_prepare_reuses_and_any_change_makes_a_new_one(tiny_corpus: TinyCorpus) -> None:
    cfg = tiny()
    first = prepare(tiny_corpus, cfg)
    said: list[str] = []
    again = prepare(tiny_corpus, cfg, said.append)
    assert again.directory == first.directory and "reusing" in said[0]
    assert (first.directory / "src.tokens").stat().st_mtime_ns == (
        again.directory / "src.tokens"
    ).stat().st_mtime_ns
    for change in (
        "data.max_len=20",
        "data.train_limit=700",
        "data.max_length_ratio=2.0",
        "data.dedupe=true",
        "data.concat=0.5",
    ):
        changed = prepare(tiny_corpus, tiny(change))
        assert changed.directory != first.directory and changed.directory.parent == first.directory.parent
    assert len(prepare(tiny_corpus, tiny("data.max_len=20"))) < len(first)
    other_tokenizer = dict(
        prepared_recipe(cfg, tiny_corpus.root), tokenizers={"src": "0" * 64, "tgt": "0" * 64}
    )
    assert prepared_directory(cfg, tiny_corpus.root, other_tokenizer) != first.directory


def test_a_corpus_listed_twice_gets_two_draws_of_its_augmentations(tiny_corpus: TinyCorpus) -> None:
    twice = "data.corpora=[{source: multi30k, weight: 0.5}, {source: multi30k, weight: 0.5}]"
    toks = (tiny_corpus.src_tok, tiny_corpus.tgt_tok)
    joined = tiny(twice, "data.concat=0.5")
    made = [prepare_corpus(joined, tiny_corpus.root, *toks, quiet, k) for k in (0, 1)]
    assert made[0].directory != made[1].directory
    texts = [{corpus.text("src", i) for i in range(len(corpus))} for corpus in made]
    assert len(texts[0]) > 800 and len(texts[1]) > 800  # the 800 pairs, and some joined
    assert texts[0] != texts[1]  # other pairs joined in each
    plain = [prepare_corpus(tiny(twice), tiny_corpus.root, *toks, quiet, k) for k in (0, 1)]
    assert plain[0].directory == plain[1].directory  # nothing drawn: one corpus, prepared once


def test_changed_training_files_make_a_new_one(
    tiny_corpus: TinyCorpus, tmp_path: Path, data_dir: Path
) -> None:
    files = {}
    for lang in ("de", "en"):
        files[lang] = tmp_path / f"train.{lang}"
        files[lang].write_text(
            "Ein Hund läuft.\nZwei Katzen.\n" if lang == "de" else "A dog runs.\nTwo cats.\n"
        )
    val = [str(data_dir / "val.de.gz"), str(data_dir / "val.en.gz")]
    sources = [f"data.files.train=[{files['de']},{files['en']}]", f"data.files.val=[{val[0]},{val[1]}]"]
    cfg = tiny("data.source=files", "data.train_limit=null", *sources)
    first = prepare(tiny_corpus, cfg)
    assert len(first) == 2
    files["de"].write_text("Ein Hund läuft.\nDrei Katzen.\n")
    files["en"].write_text("A dog runs.\nThree cats.\n")
    assert prepare(tiny_corpus, cfg).directory != first.directory


def test_an_interrupted_prepare_leaves_nothing_and_a_rerun_starts_clean(
    tiny_corpus: TinyCorpus, tmp_path
) -> None:
    def chunks():
        yield ["Ein Hund."], ["A dog."]
        raise KeyboardInterrupt

    target = tmp_path / "prepared" / "abc"
    keep = PairFilter(max_len=50, max_ratio=None)
    toks = (tiny_corpus.src_tok, tiny_corpus.tgt_tok)
    with pytest.raises(KeyboardInterrupt):
        write_prepared(target, chunks(), *toks, keep, {})
    assert list((tmp_path / "prepared").iterdir()) == []
    corpus = write_prepared(target, iter([(["Ein Hund."], ["A dog."])]), *toks, keep, {})
    assert len(corpus) == 1 and json.loads((target / MANIFEST).read_text())["pairs"] == 1


def test_a_corpus_filtered_to_nothing_is_an_error(tiny_corpus: TinyCorpus, tmp_path: Path) -> None:
    toks = (tiny_corpus.src_tok, tiny_corpus.tgt_tok)
    with pytest.raises(DataError, match="every one of the 2 training pairs was filtered out"):
        write_prepared(tmp_path / "p", iter([(["", "a"], ["b", " "])]), *toks, PairFilter(50, None), {})
    assert not (tmp_path / "p").exists()


def test_a_full_disk_is_one_error_and_leaves_nothing(tiny_corpus: TinyCorpus, tmp_path, monkeypatch) -> None:
    def no_space(self, data, lengths):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("mt_cli.data.prepared._FlatFile.append", no_space)
    toks = (tiny_corpus.src_tok, tiny_corpus.tgt_tok)
    with pytest.raises(RunFailure, match=f"^cannot write {tmp_path / 'p'}: the disk is full; free"):
        write_prepared(tmp_path / "p", iter([(["Ein Hund."], ["A dog."])]), *toks, PairFilter(50, None), {})
    assert list(tmp_path.iterdir()) == []


def test_duplicates_are_dropped_and_counted_when_asked(tiny_corpus: TinyCorpus, tmp_path: Path) -> None:
    toks, keep = (tiny_corpus.src_tok, tiny_corpus.tgt_tok), PairFilter(50, None)
    chunks = [
        (
            ["Ein Hund.", "Zwei Katzen.", "Ein Hund.", "Ein Hund."],
            ["A dog.", "Two cats.", "A dog.", "One dog."],
        ),
        (["Zwei Katzen.", "Ein Hund", "", "Ein Hund."], ["Two cats.", "A dog.", "", "A dog."]),
    ]
    deduped = PairFilter(50, None, dedupe=True)
    corpus = write_prepared(tmp_path / "d", iter(chunks), *toks, deduped, {})
    texts = [(corpus.text("src", i), corpus.text("tgt", i)) for i in range(len(corpus))]
    # the first of each pair is kept, in corpus order; equal sources with other targets are not duplicates
    assert texts == [
        ("Ein Hund.", "A dog."),
        ("Zwei Katzen.", "Two cats."),
        ("Ein Hund.", "One dog."),
        ("Ein Hund", "A dog."),
    ]
    assert corpus.manifest["dropped"] == {
        "undecodable": 0,
        "empty": 1,
        "too_long": 0,
        "ratio": 0,
        "duplicate": 3,
        "score": 0,
    }
    assert len(write_prepared(tmp_path / "all", iter(chunks), *toks, keep, {})) == 7


def test_a_damaged_corpus_is_refused(tiny_corpus: TinyCorpus) -> None:
    corpus = prepare(tiny_corpus, tiny("data.train_limit=300"))
    for name in ("tgt.tokens", "src.text"):
        damaged = corpus.directory / name
        whole = damaged.read_bytes()
        damaged.write_bytes(whole[:-1])
        with pytest.raises(CheckpointError, match="damaged"):
            PreparedCorpus.open(corpus.directory)
        damaged.write_bytes(whole)
    PreparedCorpus.open(corpus.directory)
    (corpus.directory / MANIFEST).write_text("{")
    with pytest.raises(CheckpointError, match="unreadable"):
        PreparedCorpus.open(corpus.directory)


def test_ctrl_c_in_mt_prepare_leaves_nothing_to_reuse_and_a_rerun_starts_clean(
    tmp_path: Path, data_dir, spawn
) -> None:
    # 290,000 pairs (Multi30k ten times over): encoding takes seconds, time enough to interrupt it.
    for lang in ("de", "en"):
        lines = read_lines(data_dir / f"train.{lang}.gz")
        (tmp_path / f"train.{lang}").write_text("\n".join(lines * 10) + "\n", encoding="utf-8")
    run = tmp_path / "run"
    sets = [
        "data.source=files",
        f"data.files.train=[{tmp_path / 'train.de'},{tmp_path / 'train.en'}]",
        f"data.files.val=[{data_dir / 'val.de.gz'},{data_dir / 'val.en.gz'}]",
        f"data.files.test2016=[{data_dir / 'val.de.gz'},{data_dir / 'val.en.gz'}]",
        "data.train_limit=null",
        "tokenizer.sample_sentences=3000",
    ]
    command = [sys.executable, "-m", "mt_cli", "prepare", "--config", "tiny", "--run", str(run)]
    command += [arg for item in sets for arg in ("--set", item)]
    proc = spawn(command, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    seen = []
    while proc.poll() is None and not any("encoding the training pairs" in line for line in seen):
        seen.append(proc.stderr.readline())
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130, seen
    assert proc.stderr.read().strip().splitlines()[-1] == "error: interrupted"
    assert not run.exists()  # the run directory this command created held nothing of value yet
    again = subprocess.run(
        [*command, "--set", "data.train_limit=20000"], capture_output=True, text=True, cwd=tmp_path
    )
    assert again.returncode == 0, again.stderr
    assert "prepared corpus: encoding" in again.stderr and "train: 20,000 pairs read" in again.stderr
    assert [p.name for p in (run / "prepared").iterdir() if p.name.startswith(".")] == []


def test_a_tagged_corpus_keeps_its_tags_in_the_pieces_and_the_text(tmp_path: Path) -> None:
    from mt_cli.config.sections import TokenizerConfig
    from mt_cli.text.tokenizer import train_tokenizer

    lines = read_lines(CONFIGS.parent / "data" / "multi30k" / "val.de.gz")[:300]
    targets = read_lines(CONFIGS.parent / "data" / "multi30k" / "val.en.gz")[:300]
    src_tok = train_tokenizer(lines, "de", 300, TokenizerConfig(), tmp_path, tags=["<2en>", "<bt>"])
    tgt_tok = train_tokenizer(targets, "en", 300, TokenizerConfig(), tmp_path)
    chunks = [(["Ein Hund.", "", None, "Zwei Katzen."], ["A dog.", "Nothing.", "Broken.", "Two cats."])]
    corpus = write_prepared(
        tmp_path / "tagged", chunks, src_tok, tgt_tok, PairFilter(40, None), {"r": 1}, prefix="<2en> <bt> "
    )
    # The filters judge the text as read: a blank or broken source is dropped, whatever its tags.
    assert len(corpus) == 2 and corpus.manifest["dropped"]["empty"] == 1
    assert corpus.manifest["dropped"]["undecodable"] == 1
    assert [corpus.text("src", i) for i in range(2)] == ["<2en> <bt> Ein Hund.", "<2en> <bt> Zwei Katzen."]
    assert corpus.pieces("src", 0) == [4, 5, *src_tok.encode(["Ein Hund."])[0]]
    assert corpus.text("tgt", 1) == "Two cats."  # targets carry no tags
