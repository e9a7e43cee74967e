"""data/epochs.py and data/loader.py: an epoch's batches per rank, fixed or re-segmented by
BPE-dropout pool by pool, loaded in worker processes, resumed mid-epoch and carried on across
epochs; the same batches for the same seed, whatever corpus draws the pairs."""

from __future__ import annotations

import hashlib
import pickle

import numpy as np
import pytest
import torch
from helpers import CONFIGS, FAST_TRAINING, TinyCorpus, quiet

from mt_cli.config.recipe import load_config
from mt_cli.config.sections import Config
from mt_cli.data import epochs
from mt_cli.data.batch import Batch
from mt_cli.data.epochs import DropoutBatches, FixedBatches, epoch_plan
from mt_cli.data.loader import EpochLoader
from mt_cli.data.mixing import MixedCorpus
from mt_cli.data.prepare import prepare_corpus
from mt_cli.data.prepared import PreparedCorpus
from mt_cli.errors import DataError
from mt_cli.specials import BOS_ID, EOS_ID


def tiny(*overrides: str) -> Config:
    return load_config(CONFIGS / "tiny.yaml", [*FAST_TRAINING, *overrides])


def plan_for(tiny_corpus: TinyCorpus, cfg: Config, rank: int = 0, world_size: int = 1):
    toks = (tiny_corpus.src_tok, tiny_corpus.tgt_tok)
    corpus = prepare_corpus(cfg, tiny_corpus.root, *toks, quiet)
    return epoch_plan(cfg, corpus, toks, rank, world_size)


def tensors(batches: list[Batch]) -> list[tuple[list, list]]:
    return [(b.src.tolist(), b.tgt_out.tolist()) for b in batches]


def sentences(batches: list[Batch], side: str = "src") -> list[list[int]]:
    """Each sentence's ids without padding (sources with EOS, targets as tgt_out)."""
    rows = []
    for b in batches:
        ids, mask = (b.src, b.src_mask[:, 0, 0]) if side == "src" else (b.tgt_out, b.tgt_out != 0)
        rows += [row[keep].tolist() for row, keep in zip(ids, mask, strict=True)]
    return rows


@pytest.mark.parametrize("workers", [0, 1])
def test_fixed_batches_resume_mid_epoch_and_run_on_into_the_next(
    tiny_corpus: TinyCorpus, workers: int
) -> None:
    plan = plan_for(tiny_corpus, tiny())
    assert isinstance(plan, FixedBatches)
    whole = EpochLoader(plan, 0, seed=1)
    first, second = list(whole.batches(0)), list(whole.batches(1))  # the second carries on the stream
    assert len(first) == len(second) == plan.length()
    assert tensors(second) != tensors(first)  # each epoch its own order
    loader = EpochLoader(plan, workers, seed=1)
    assert tensors(list(loader.batches(0, start=5))) == tensors(first[5:])
    assert tensors(list(loader.batches(1))) == tensors(second)
    assert tensors(list(EpochLoader(plan, workers, seed=1).batches(1, start=3))) == tensors(second[3:])
    expected = [plan.corpus.collate(indices.tolist()) for indices in plan.units(0)]
    assert tensors(first) == tensors(expected)
    # one prepared corpus draws every pair once, whatever the seed and epoch
    assert plan.corpus.epoch_draws(3, 4).tolist() == list(range(len(plan.corpus)))
    assert plan.corpus.fixed_draws()


def test_dropout_segments_each_epoch_anew_and_keeps_the_text(tiny_corpus: TinyCorpus, monkeypatch) -> None:
    monkeypatch.setattr(epochs, "POOL_TOKENS", 4 * 1024)  # several pools even in the tiny corpus
    cfg = tiny("tokenizer.src_bpe_dropout=0.1")
    plan = plan_for(tiny_corpus, cfg)
    assert isinstance(plan, DropoutBatches)
    corpus: PreparedCorpus = plan.corpus
    pools = plan.units(0)
    assert len(pools) > 3
    assert sorted(i for pool in pools for i in pool.pairs.tolist()) == list(range(len(corpus)))
    loader = EpochLoader(plan, 0, seed=1)
    epoch0, epoch1 = list(loader.batches(0)), list(loader.batches(1))
    assert tensors(list(EpochLoader(plan, 0, seed=1).batches(0))) == tensors(epoch0)  # seeded
    for batches in (epoch0, epoch1):
        assert sum(b.n_sentences for b in batches) == len(corpus)  # every pair once per epoch
        assert all(
            b.src.numel() + b.tgt_in.numel() <= cfg.train.max_tokens or b.n_sentences == 1 for b in batches
        )
    src0, src1 = sentences(epoch0), sentences(epoch1)
    fixed = [corpus.pieces("src", i) + [EOS_ID] for i in range(len(corpus))]
    assert sum(map(len, src0)) > 1.05 * sum(map(len, fixed))  # skipped merges: more pieces
    assert sorted(src0) != sorted(src1)  # drawn anew each epoch
    decode = tiny_corpus.src_tok.decode
    texts = sorted(corpus.text("src", i) for i in range(len(corpus)))
    assert sorted(decode(src0)) == sorted(decode(fixed)) == sorted(decode(src1))
    assert texts[0] and all(isinstance(t, str) for t in texts)
    # the target side has no dropout: its fixed pieces
    fixed_tgt = sorted(corpus.pieces("tgt", i) + [EOS_ID] for i in range(len(corpus)))
    assert sorted(sentences(epoch0, "tgt")) == fixed_tgt
    # a resumed epoch gets the batches it began with, with a worker process too
    resumed = list(EpochLoader(plan, 1, seed=1).batches(0, start=7))
    assert tensors(resumed) == tensors(epoch0[7:])


def test_dropout_batches_are_bucketed_by_their_new_widths(tiny_corpus: TinyCorpus) -> None:
    cfg = tiny("tokenizer.src_bpe_dropout=0.1", "tokenizer.tgt_bpe_dropout=0.1")
    batches = list(EpochLoader(plan_for(tiny_corpus, cfg), 0, seed=1).batches(0))
    real = sum(b.src_tokens + b.tgt_tokens for b in batches)
    padded = sum(b.src.numel() + b.tgt_in.numel() for b in batches)
    assert real / padded > 0.85  # bucketed by the fixed widths instead, padding doubled


def test_pairs_that_grow_past_max_len_keep_their_fixed_pieces(tiny_corpus: TinyCorpus) -> None:
    cfg = tiny("tokenizer.src_bpe_dropout=0.9", "tokenizer.tgt_bpe_dropout=0.9", "data.max_len=20")
    plan = plan_for(tiny_corpus, cfg)
    corpus = plan.corpus
    (pool,) = plan.units(0)
    src, tgt = ([flat[j] for j in range(len(flat))] for flat in plan.segment(pool))
    limit = cfg.data.max_len
    assert max(map(len, src)) <= limit + 1 and max(map(len, tgt)) <= limit + 2
    kept_fixed = [j for j, i in enumerate(pool.pairs.tolist()) if src[j][:-1] == corpus.pieces("src", i)]
    assert kept_fixed  # at dropout 0.9 some pairs outgrow max_len ...
    for j in kept_fixed:  # ... and keep the fixed pieces on both sides
        assert tgt[j] == [BOS_ID, *corpus.pieces("tgt", int(pool.pairs[j])), EOS_ID]


@pytest.mark.parametrize("world_size", [2, 3])
def test_dropout_ranks_share_each_pool_equally(tiny_corpus: TinyCorpus, monkeypatch, world_size: int) -> None:
    monkeypatch.setattr(epochs, "POOL_TOKENS", 4 * 1024)
    cfg = tiny("tokenizer.tgt_bpe_dropout=0.1")
    ranks = [
        list(EpochLoader(plan_for(tiny_corpus, cfg, r, world_size), 0, seed=1).batches(2))
        for r in range(world_size)
    ]
    assert len({len(batches) for batches in ranks}) == 1  # DDP: every rank as many batches
    all_sources = sorted(s for batches in ranks for s in sentences(batches))
    corpus = plan_for(tiny_corpus, cfg).corpus
    assert all_sources == sorted(corpus.pieces("src", i) + [EOS_ID] for i in range(len(corpus)))


def test_the_loader_leaves_the_training_random_stream_alone(tiny_corpus: TinyCorpus) -> None:
    torch.manual_seed(5)
    state = torch.get_rng_state()
    for workers in (0, 1):
        list(EpochLoader(plan_for(tiny_corpus, tiny()), workers, seed=1).batches(0))
    assert torch.equal(torch.get_rng_state(), state)  # so resuming mid-epoch is exact


def _refuse(unit) -> None:
    raise DataError("cannot give 2 processes equal shares of 1 pairs")


def test_an_error_in_a_worker_reaches_the_command_as_itself(tiny_corpus: TinyCorpus) -> None:
    plan = plan_for(tiny_corpus, tiny())
    plan.load = _refuse
    with pytest.raises(DataError) as caught:
        list(EpochLoader(plan, 1, seed=1).batches(0))
    assert str(caught.value) == "cannot give 2 processes equal shares of 1 pairs"  # one line, no traceback


@pytest.mark.parametrize("dropout", ["0.0", "0.1"])
def test_plans_travel_to_spawned_workers(tiny_corpus: TinyCorpus, dropout: str) -> None:
    # fork shares the plan; spawn and forkserver (Python 3.14's default) pickle it, and the
    # prepared corpus is opened anew on the other side.
    plan = plan_for(tiny_corpus, tiny(f"tokenizer.src_bpe_dropout={dropout}"))
    copy = pickle.loads(pickle.dumps(plan))
    assert copy.corpus is not plan.corpus and copy.corpus.directory == plan.corpus.directory
    unit = plan.units(1)[0]
    assert tensors(list(copy.load(unit))) == tensors(list(plan.load(unit)))


# The default recipe's tokenizers, prepared corpus and first two epochs of batches, hashed with
# the code from before data.corpora existed: a one-corpus run must batch exactly as it always did.
DEFAULT_BATCHES_SHA256 = "4524082b6823f9480a4348fe06eaa76d3a8a3b1fa1f91daea655113e4f17b9c9"


def test_the_default_recipe_batches_as_it_always_did(tmp_path) -> None:
    import hashlib
    import itertools

    from mt_cli.data.prepare import tokenizer_sample
    from mt_cli.text.tokenizer import prepare_tokenizers

    cfg = load_config("multi30k")
    toks = prepare_tokenizers(cfg, tmp_path, *tokenizer_sample(cfg), log=quiet)
    corpus = prepare_corpus(cfg, tmp_path, *toks, quiet)
    plan = epoch_plan(cfg, corpus, toks, 0, 1)
    assert isinstance(plan, FixedBatches)
    digest = hashlib.sha256()
    for side in ("src", "tgt"):
        digest.update((corpus.directory / f"{side}.tokens").read_bytes())
        digest.update(corpus.offsets[side].tobytes())
    for epoch in (0, 1):
        for unit in plan.units(epoch):
            digest.update(unit.astype("int64").tobytes())
    for batch in itertools.islice(EpochLoader(plan, 0, cfg.train.seed).batches(0), 20):
        for tensor in (batch.src, batch.tgt_in, batch.tgt_out, batch.src_mask, batch.tgt_mask):
            digest.update(tensor.numpy().tobytes())
    assert digest.hexdigest() == DEFAULT_BATCHES_SHA256


class Widths:
    """A corpus of widths only (a fixed pattern, no tokenizer), drawing every pair once an epoch."""

    def __init__(self, size: int, step: int) -> None:
        k = np.arange(size, dtype=np.int64)
        self._widths = ((k * step) % 29 + 2).astype(np.int32), ((k * (step + 3)) % 31 + 3).astype(np.int32)

    def __len__(self) -> int:
        return len(self._widths[0])

    def widths(self) -> tuple[np.ndarray, np.ndarray]:
        return self._widths

    def epoch_draws(self, seed: int, epoch: int) -> np.ndarray:
        return np.arange(len(self), dtype=np.int64)

    def fixed_draws(self) -> bool:
        return True


# Epochs 0-2 of units for seed 7 at max_tokens 300, hashed with the code from before the plans
# asked every corpus for its draws (0224b4e: ``FixedBatches`` for one corpus, ``MixedBatches`` for
# several, ``DropoutBatches`` with an isinstance): one plan for all must batch exactly as those did.
PINNED_UNITS = {
    ("one", "fixed", 0, 1): (77, "6bed2ed4926f39cbab04c5c09cc85b387fde38eeeeb530ca51f9babf9622a188"),
    ("one", "fixed", 1, 2): (39, "ca848f770f7eab8381f6585ba15b4451fde240b5b62200a04856a89b867db1ff"),
    ("one", "pools", 0, 1): (None, "95d53044a4600e885a5480a3667df9cc3203405b2cfbcba0bb75024a4ca27826"),
    ("mixed", "fixed", 0, 1): (None, "a1cd2d528f27450299de2e62e1caa7f2bcc34dda1eed470722e611410818c355"),
    ("mixed", "fixed", 1, 2): (None, "50a4354d3f0d86a6a590683e0e88f1b155a1765c7aefe886c61105847f6b85e1"),
    ("mixed", "pools", 0, 1): (None, "63666a8d1fde63b61b4a9c4afbacba4905ac9174361c3446d6ed375a6f2a6b65"),
}
FIRST_BATCH = {
    "one": [172, 259, 346, 433, 27, 114],
    "mixed": [101, 43, 367, 396, 425, 246, 188, 130],  # weight 0.5: global indices 300 on are drawn
}


@pytest.mark.parametrize("case", PINNED_UNITS)
def test_the_units_of_each_corpus_are_pinned_for_a_fixed_seed(case: tuple, monkeypatch) -> None:
    name, kind, rank, world_size = case
    monkeypatch.setattr(epochs, "POOL_TOKENS", 3000)  # several pools
    corpus = Widths(500, 7) if name == "one" else MixedCorpus([Widths(300, 5), Widths(200, 11)], [1, 0.5])
    if kind == "fixed":
        plan = FixedBatches(corpus, 300, 7, rank, world_size)
    else:
        plan = DropoutBatches(corpus, (None, None), (0.1, 0.0), 40, 300, 7, rank, world_size)
    digest = hashlib.sha256()
    for epoch in (0, 1, 2):
        for unit in plan.units(epoch):
            if kind == "pools":
                digest.update(str(unit.seed).encode())
                unit = unit.pairs
            digest.update(unit.astype(np.int64).tobytes())
    assert (plan.length(), digest.hexdigest()) == PINNED_UNITS[case]
    if kind == "fixed" and rank == 0:
        assert plan.units(0)[0].tolist() == FIRST_BATCH[name]
