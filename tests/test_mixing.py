"""data/mixing.py and data.corpora: several prepared corpora drawn by weight in every epoch,
resumed exactly mid-epoch, each prepared once and reported with its own counts; tags before the
sources of a corpus and of a target language."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import CONFIGS, FAST_TRAINING, TinyCorpus, quiet

from mt_cli.config.recipe import load_config
from mt_cli.config.sections import Config
from mt_cli.data.epochs import DropoutBatches, FixedBatches, epoch_plan
from mt_cli.data.loader import EpochLoader
from mt_cli.data.mixing import MixedCorpus
from mt_cli.data.prepare import load_more_directions, prepare_corpora, training_corpus, training_data
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.errors import DataError


def two_corpora(weights: tuple[float, float], *overrides: str) -> Config:
    """The tiny recipe on two de->en corpora: the first 300 and the first 200 Multi30k pairs."""
    corpora = [
        {"source": "multi30k", "train_limit": 300, "weight": weights[0]},
        {"source": "multi30k", "train_limit": 200, "weight": weights[1]},
    ]
    return load_config(
        CONFIGS / "tiny.yaml", [*FAST_TRAINING, f"data.corpora={json.dumps(corpora)}", *overrides]
    )


def mixed(tiny_corpus: TinyCorpus, cfg: Config) -> MixedCorpus:
    toks = (tiny_corpus.src_tok, tiny_corpus.tgt_tok)
    corpus = training_corpus(cfg, prepare_corpora(cfg, tiny_corpus.root, *toks, quiet))
    assert isinstance(corpus, MixedCorpus)
    return corpus


def plan_for(tiny_corpus: TinyCorpus, cfg: Config):
    return epoch_plan(cfg, mixed(tiny_corpus, cfg), (tiny_corpus.src_tok, tiny_corpus.tgt_tok), 0, 1)


def tensors(batches) -> list[tuple[list, list]]:
    return [(b.src.tolist(), b.tgt_out.tolist()) for b in batches]


def test_weights_1_and_3_draw_the_corpora_1_to_3(tiny_corpus: TinyCorpus) -> None:
    plan = plan_for(tiny_corpus, two_corpora((1, 3)))
    assert isinstance(plan, FixedBatches)  # the plan of one corpus, over the draws
    corpus = plan.corpus
    sizes = [len(part) for part in corpus.parts]
    assert sizes[0] > sizes[1] > 150  # two corpora of their own (the filters keep most pairs)
    for epoch in (0, 1):
        drawn = np.concatenate(plan.units(epoch))  # every pair of the epoch's batches
        per_pair = np.bincount(drawn, minlength=len(corpus))
        assert (per_pair[: sizes[0]] == 1).all() and (per_pair[sizes[0] :] == 3).all()
        per_corpus = np.bincount(corpus.corpus_of(drawn), minlength=2)
        assert per_corpus.tolist() == [sizes[0], 3 * sizes[1]]  # per pair, 1:3
    assert corpus.fixed_draws() and plan.length() == len(plan.units(0)) == len(plan.units(1))
    # The batches mix the corpora: no batch of corpus 1 only, as there would be without a shuffle.
    kinds = [set(corpus.corpus_of(unit).tolist()) for unit in plan.units(0)]
    assert sum(kind == {0, 1} for kind in kinds) > len(kinds) // 2


def test_a_fractional_weight_draws_that_share_seeded_and_other_pairs_each_epoch(
    tiny_corpus: TinyCorpus,
) -> None:
    corpus = mixed(tiny_corpus, two_corpora((1, 0.5)))
    start, size = int(corpus.starts[1]), len(corpus.parts[1])
    second = [d[d >= start] for d in (corpus.epoch_draws(1, 0), corpus.epoch_draws(1, 1))]
    assert [len(d) for d in second] == [round(size / 2)] * 2
    assert all(len(np.unique(d)) == len(d) for d in second)  # a share of the pairs, each once
    assert not np.array_equal(second[0], second[1])  # another half each epoch
    assert np.array_equal(corpus.epoch_draws(1, 0), corpus.epoch_draws(1, 0))  # (seed, epoch) decide
    assert not np.array_equal(corpus.epoch_draws(2, 0), corpus.epoch_draws(1, 0))
    whole = corpus.epoch_draws(1, 0)[corpus.epoch_draws(1, 0) < start]
    assert np.array_equal(whole, np.arange(start))  # weight 1: every pair of corpus 0, once
    two_and_a_half = MixedCorpus(corpus.parts, [1.0, 2.5]).epoch_draws(1, 0)
    assert np.bincount(two_and_a_half[two_and_a_half >= start] - start).tolist().count(3) == round(size / 2)
    plan = epoch_plan(two_corpora((1, 0.5)), corpus, (tiny_corpus.src_tok, tiny_corpus.tgt_tok), 0, 1)
    assert not corpus.fixed_draws() and plan.length() is None  # each epoch packs other pairs


@pytest.mark.parametrize("workers", [0, 1])
def test_two_corpora_resume_mid_epoch_with_the_batches_of_an_uninterrupted_run(
    tiny_corpus: TinyCorpus, workers: int
) -> None:
    plan = plan_for(tiny_corpus, two_corpora((1, 2.5)))
    whole = EpochLoader(plan, 0, seed=1)
    first, second = list(whole.batches(0)), list(whole.batches(1))
    assert len(first) > 10 and tensors(first) != tensors(second)
    resumed = EpochLoader(plan, workers, seed=1)
    assert tensors(list(resumed.batches(0, start=7))) == tensors(first[7:])
    assert tensors(list(resumed.batches(1))) == tensors(second)  # and on into the next epoch
    assert tensors(list(EpochLoader(plan, workers, seed=1).batches(1, start=3))) == tensors(second[3:])


def test_two_corpora_under_bpe_dropout_pool_the_draws_and_resume(tiny_corpus: TinyCorpus) -> None:
    cfg = two_corpora((1, 3), "tokenizer.src_bpe_dropout=0.1")
    plan = plan_for(tiny_corpus, cfg)
    assert isinstance(plan, DropoutBatches)
    corpus = plan.corpus
    pairs = np.concatenate([pool.pairs for pool in plan.units(0)])
    assert np.array_equal(np.sort(pairs), np.sort(corpus.epoch_draws(1, 0)))  # the draws, in pools
    batches = list(EpochLoader(plan, 0, seed=1).batches(0))
    assert sum(b.n_sentences for b in batches) == len(corpus.parts[0]) + 3 * len(corpus.parts[1])
    assert tensors(list(EpochLoader(plan, 0, seed=1).batches(0, start=4))) == tensors(batches[4:])


def test_a_mixed_plan_travels_to_worker_processes(tiny_corpus: TinyCorpus) -> None:
    plan = plan_for(tiny_corpus, two_corpora((1, 2)))
    copy = pickle.loads(pickle.dumps(plan))
    unit = plan.units(0)[0]
    assert tensors(copy.load(unit)) == tensors(plan.load(unit))
    assert len(pickle.dumps(plan.corpus)) < 2000  # the corpora are opened anew, not copied


def test_one_corpus_of_weight_1_is_batched_as_before(tiny_corpus: TinyCorpus) -> None:
    cfg = load_config(CONFIGS / "tiny.yaml", FAST_TRAINING)
    listed = load_config(CONFIGS / "tiny.yaml", [*FAST_TRAINING, "data.corpora=[{source: multi30k}]"])
    toks = (tiny_corpus.src_tok, tiny_corpus.tgt_tok)
    one, [again] = (prepare_corpora(c, tiny_corpus.root, *toks, quiet) for c in (cfg, listed))
    assert one[0].directory == again.directory  # the same key: one corpus, prepared once
    assert training_corpus(listed, [again]) is again  # not a MixedCorpus: the same batches


def test_a_run_of_two_directions_is_validated_and_tested_in_each(tiny_corpus: TinyCorpus) -> None:
    both = [{"source": "multi30k"}, {"source": "multi30k", "src_lang": "en", "tgt_lang": "de"}]
    cfg = load_config(CONFIGS / "tiny.yaml", [*FAST_TRAINING, f"data.corpora={json.dumps(both)}"])
    train = tiny_corpus.training_data(load_config(CONFIGS / "tiny.yaml", FAST_TRAINING)).train
    more = load_more_directions(cfg, quiet)
    data = training_data(cfg, tiny_corpus.splits, tiny_corpus.src_tok, tiny_corpus.tgt_tok, train, more)
    first, second = data.evaluation
    assert (first.name, second.name) == ("de-en", "en-de")
    # Untagged, as a user gives them: the engine (and validation's loss) put the target tag first.
    val = tiny_corpus.splits["val"][0]
    assert (first.val_src[0], first.val_ref[0]) == (val["src"], val["tgt"])
    assert (second.val_src[0], second.val_ref[0]) == (val["tgt"], val["src"])  # the same pair reversed
    test = tiny_corpus.splits["test2016"][0]
    assert (second.test_src[0], second.test_ref[0]) == (test["tgt"], test["src"])
    assert len(second.val_src) == len(first.val_src) == 1014


def mt(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mt_cli", *args], capture_output=True, text=True, cwd=cwd, env=env
    )


def test_mt_prepare_reports_each_corpus_and_refuses_text_holding_a_tag(tmp_path: Path) -> None:
    de = read_lines(SHIPPED_MULTI30K / "val.de.gz")[:60]
    en = read_lines(SHIPPED_MULTI30K / "val.en.gz")[:60]
    en[5] = ""  # dropped: an empty side
    (tmp_path / "extra.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "extra.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    corpora = [
        {"source": "multi30k", "train_limit": 300},
        {"source": "files", "files": {"train": ["extra.de", "extra.en"]}, "weight": 2, "tag": "<x>"},
    ]
    corpora_set = f"data.corpora={json.dumps(corpora)}"
    longer = ["--set", "data.max_len=200", "--set", "model.max_positions=256"]  # no pair too long
    args = ["prepare", "--config", "tiny", "--run", "run", "--set", corpora_set, *longer]
    result = mt(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    first = next(line for line in lines if line.startswith("corpus 1 (multi30k de->en, weight 1): "))
    second = next(line for line in lines if line.startswith("corpus 2 (files de->en, weight 2, tag <x>): "))
    assert "300 pairs read, 300 kept; dropped: not UTF-8 0, empty 0, longer than data.max_len 0" in first
    assert "60 pairs read, 59 kept; dropped: not UTF-8 0, empty 1, longer than data.max_len 0" in second
    manifests = [
        json.loads(p.read_text()) for p in sorted((tmp_path / "run" / "prepared").glob("*/manifest.json"))
    ]
    assert sorted((m["read"], m["pairs"], m["dropped"]["empty"]) for m in manifests)[0] == (60, 59, 1)
    assert {m["recipe"].get("prefix") for m in manifests} == {None, "<x> "}

    de[7] = "Ein <x> Hund."  # the text holds the tag: one line, exit 2, nothing prepared for it
    (tmp_path / "extra.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    result = mt(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert [line for line in result.stderr.splitlines() if "error" in line] == [
        "error: corpus 2 (files de->en, weight 2, tag <x>): training pair 8 already holds the tag <x>, which "
        "the run puts before sources; remove it from the text, or choose another tag"
    ]
    assert "tokenizer de: training" not in result.stderr  # refused before a tokenizer learned from it


def test_tokenizers_without_the_runs_tags_are_refused(tiny_corpus: TinyCorpus) -> None:
    cfg = load_config(CONFIGS / "tiny.yaml", [*FAST_TRAINING, "data.target_tags=true"])
    with pytest.raises(DataError, match="the de tokenizer has no tag <2en>: it was trained without it"):
        prepare_corpora(cfg, tiny_corpus.root, tiny_corpus.src_tok, tiny_corpus.tgt_tok, quiet)
