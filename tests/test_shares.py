"""Each rank's share of a translation (train/shares.py): the deal, and two gloo processes that
translate a distillation corpus between them into the bytes one process writes.

One tiny de->en teacher (10 updates on 300 pairs) translates 60 German task 2 captions.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
import torch.distributed as torch_dist
import torch.multiprocessing as torch_mp
from helpers import CONFIGS, quiet

from mt_cli.config.recipe import load_config
from mt_cli.config.sections import Config
from mt_cli.data import synthetic
from mt_cli.decode.translator import Translator
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.runtime.distributed import Distributed
from mt_cli.train import backtranslation
from mt_cli.train.run import train
from mt_cli.train.shares import lines_of, missing, share_of

CAPTIONS = SHIPPED_MULTI30K / "task2" / "train.1.de.gz"
LINES = 60
CHUNK = 30  # two chunks: one for each rank
SMALL = ["data.train_limit=300", "train.amp=off", "train.test_at_end=false", "train.val_bleu=false"]


def test_the_chunks_one_process_makes_are_dealt_to_the_ranks_in_turn() -> None:
    one = share_of([], 25, 0, 1, 10)
    assert one.chunks == [(0, 10), (10, 20), (20, 25)] and (one.lines, one.left, one.kept) == (25, 25, 0)
    assert [share_of([], 25, rank, 2, 10).chunks for rank in (0, 1)] == [[(0, 10), (20, 25)], [(10, 20)]]
    assert [share_of([], 10, rank, 2, 100).chunks for rank in (0, 1)] == [[(0, 10)], []]  # one chunk


def test_only_the_lines_no_kept_chunk_holds_are_dealt() -> None:
    # An interrupted two-rank run kept [0, 10) and [20, 30) of 40 lines.
    assert missing([(0, 10), (20, 30)], 40) == [(10, 20), (30, 40)]
    assert missing([(0, 40)], 40) == [] and missing([], 7) == [(0, 7)]
    deal = [share_of([(0, 10), (20, 30)], 40, rank, 2, 100) for rank in (0, 1)]
    assert [d.chunks for d in deal] == [[(10, 20)], [(30, 40)]]
    assert (deal[0].left, deal[0].kept) == (20, 20)
    # Chunks kept by a run with other cuts: the rest is cut where one process would cut it.
    assert [share_of([(0, 15)], 40, rank, 2, 10).chunks for rank in (0, 1)] == [
        [(15, 20), (30, 40)],
        [(20, 30)],
    ]


def test_the_kept_chunks_of_ranks_that_stopped_midway_are_read_with_their_gaps(tmp_path: Path) -> None:
    partial = synthetic.Partial(tmp_path / "key.partial")
    for first, end in [(0, 10), (0, 15), (5, 12), (20, 30)]:  # (5, 12) inside (0, 15): another try's
        partial.save(
            synthetic.Chunk(
                first, ["x"] * (end - first), [["y"]] * (end - first), [[0.0]] * (end - first), 0, 0.0
            )
        )
    assert partial.kept() == [(0, 15), (20, 30)] and partial.done() == 15
    assert [(c.first, c.end) for c in partial.chunks()] == [(0, 15)]  # what is whole from line 0


def test_a_ranks_lines_are_read_in_one_pass() -> None:
    text = iter(f"line {i}" for i in range(10))
    assert list(lines_of(text, [(1, 3), (6, 7)])) == [(1, ["line 1", "line 2"]), (6, ["line 6"])]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("teacher") / "de-en"
    overrides = [*SMALL, "train.max_steps=10", "train.validate_every_steps=10", "train.average_last=0"]
    train(load_config(CONFIGS / "tiny.yaml", overrides), run, resume=False, log=quiet)
    return run


def distilled(teacher: Path, cache: Path) -> Config:
    """The tiny recipe plus 60 captions translated by ``teacher`` (beam 3, its 2-best list)."""
    entry = {
        "source": "distillation",
        "run": str(teacher),
        "text": [str(CAPTIONS)],
        "train_limit": LINES,
        "decode": {"beam": 3, "n_best": 2},
        "cache_dir": str(cache),
    }
    corpora = json.dumps([{"source": "multi30k"}, entry])
    return load_config(CONFIGS / "tiny.yaml", [*SMALL, f"data.corpora={corpora}", "train.device=cpu"])


def _rank(rank: int, teacher: Path, cache: Path, store: Path, heard: Path) -> None:
    """One of two gloo processes: its share of the translation, and what it translated and logged."""
    torch.set_num_threads(1)  # decode in this process, as OMP_NUM_THREADS=1 under torchrun
    torch_dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    translated: list[str] = []
    translate = Translator.translate

    def counted(self: Translator, lines: list[str], *args: object, **kwargs: object) -> list:
        translated.extend(lines)
        return translate(self, lines, *args, **kwargs)

    Translator.translate = counted  # this process's own class and module: nothing outside sees them
    backtranslation.CHUNK = CHUNK
    log: list[str] = []
    try:
        backtranslation.make_synthetic(distilled(teacher, cache), log.append, Distributed(rank, 2, rank))
    finally:
        torch_dist.destroy_process_group()
    (heard / f"{rank}.json").write_text(json.dumps({"translated": translated, "log": log}))


def test_two_ranks_translate_a_chunk_each_into_the_bytes_one_process_writes(
    teacher: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backtranslation, "CHUNK", CHUNK)
    one = distilled(teacher, tmp_path / "one")
    backtranslation.make_synthetic(one, quiet)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch_mp.spawn(_rank, args=(teacher, tmp_path / "two", tmp_path / "store", tmp_path), nprocs=2)
    alone = synthetic.resolve(one.data.entries()[1])
    shared = synthetic.resolve(distilled(teacher, tmp_path / "two").data.entries()[1])
    for name in (synthetic.TEXT, synthetic.TRANSLATION, synthetic.SCORES):
        assert (shared.directory / name).read_bytes() == (alone.directory / name).read_bytes(), name
    assert (shared.provenance()["lines"], shared.provenance()["pairs"]) == (LINES, 2 * LINES)
    assert os.listdir(tmp_path / "two") == [shared.key]  # whole, and every rank's chunks gone
    ranks = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in (0, 1)]
    text = (alone.directory / synthetic.TEXT).read_text(encoding="utf-8").splitlines()[::2]  # 2-best
    assert ranks[0]["translated"] == text[:CHUNK] and ranks[1]["translated"] == text[CHUNK:]
    assert any("rank 1 of 2 translates 30" in line for line in ranks[1]["log"]), ranks[1]["log"]
    assert any("120 synthetic pairs of 60 lines" in line for line in ranks[0]["log"])  # rank 0 wrote it
    assert not any("synthetic pairs" in line for line in ranks[1]["log"])
