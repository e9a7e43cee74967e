"""Warm start (``train.init_from``): a new run from another run's weights and tokenizers.

One tiny parent per module (de->en, 20 updates, validated with BLEU at update 20); each child
trains a few updates from it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import typing
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from helpers import CONFIGS, quiet

from mt_cli.checkpoint import Checkpoint
from mt_cli.config.card import ModelCard, ParentCard, card_from_dict
from mt_cli.config.recipe import config_to_dict, load_config
from mt_cli.config.rules import FREEZABLE
from mt_cli.config.sections import TrainConfig
from mt_cli.disk.files import file_sha256
from mt_cli.disk.layout import RunDir
from mt_cli.errors import CheckpointError
from mt_cli.model.transformer import build_model
from mt_cli.runtime.distributed import Distributed
from mt_cli.train.optim import learning_rate
from mt_cli.train.run import prepare, prepare_data, train
from mt_cli.train.shrink import layers_to_copy, shrink
from mt_cli.train.trainer import Trainer
from mt_cli.train.warm_start import _parts, find_parent, freeze

SMALL = [
    "data.train_limit=400",
    "train.max_tokens=1024",
    "train.amp=off",
    "train.test_at_end=false",
    "train.average_last=0",
    "train.log_every_steps=1",
]


def hashes(root: Path) -> dict[str, str]:
    """Every file under ``root`` and the SHA-256 of its bytes."""
    return {str(p.relative_to(root)): file_sha256(p) for p in sorted(root.rglob("*")) if p.is_file()}


def events(run: Path, kind: str) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


@pytest.fixture(scope="module")
def parent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("parent") / "run"
    overrides = [*SMALL, "train.max_steps=20", "train.validate_every_steps=20"]
    train(load_config(CONFIGS / "tiny.yaml", overrides), run, resume=False, log=quiet)
    return run


def child_trainer(parent: Path, run_dir: Path, *overrides: str) -> Trainer:
    """A trainer for a warm start from ``parent``, started (weights loaded, scored at update 0)."""
    cfg = load_config(
        CONFIGS / "tiny.yaml", [*SMALL, "train.val_bleu=false", f"train.init_from={parent}", *overrides]
    )
    run = RunDir(run_dir)
    run.root.mkdir(parents=True)
    found = find_parent(cfg.train.init_from, cfg, run)
    torch.manual_seed(cfg.train.seed)
    trainer = Trainer(cfg, run, prepare_data(cfg, run, Distributed(), quiet, found), Distributed(), quiet)
    trainer.start_from(found)
    return trainer


def test_a_child_starts_at_its_parents_score_and_names_it_in_its_card(parent: Path, tmp_path: Path) -> None:
    before = hashes(parent)
    child = tmp_path / "child"
    overrides = [*SMALL, "train.max_steps=4", "train.validate_every_steps=4", f"train.init_from={parent}"]
    cfg = load_config(CONFIGS / "tiny.yaml", overrides)
    train(cfg, child, resume=False, log=quiet)

    # The child scores the weights of the parent's best.pt with the same code on the same val split
    # at update 0: the parent's own logged score of them.
    parent_best = [e for e in events(parent, "val") if e["best"]][-1]
    first = events(child, "val")[0]
    assert (
        first["step"] == 0 and first["bleu"] == parent_best["bleu"] and first["loss"] == parent_best["loss"]
    )
    assert events(child, "val")[1]["step"] == 4

    best = RunDir(parent).best
    for name in ("best", "last"):
        card = Checkpoint.load(RunDir(child).checkpoints / f"{name}.pt").card
        assert card.parent == ParentCard(str(parent), str(best), file_sha256(best))
    for lang in ("de", "en"):  # adopted, byte for byte
        assert file_sha256(RunDir(child).tokenizer(lang)) == file_sha256(RunDir(parent).tokenizer(lang))
    # A fresh schedule: update 1 warms up from zero, as in a run from scratch.
    assert events(child, "train")[0]["lr"] == pytest.approx(learning_rate(1, cfg.train, cfg.model.d_model))
    assert events(child, "train")[0]["lr"] < cfg.train.lr / 10
    assert hashes(parent) == before


def test_frozen_parts_stay_bitwise_and_the_rest_learns(parent: Path, tmp_path: Path) -> None:
    trainer = child_trainer(
        parent, tmp_path / "child", "train.freeze=[encoder, embeddings]", "train.max_steps=5"
    )
    trainer.fit()
    assert trainer.progress.step == 5
    start = Checkpoint.load(RunDir(parent).best).model
    in_optimizer = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    # Tied output (the tiny recipe's default): output.weight is the frozen target embedding.
    frozen = ("encoder.", "encoder_norm.", "src_embed.", "tgt_embed.", "output.")
    for name, param in trainer.model.named_parameters(remove_duplicate=False):
        same = torch.equal(param.detach(), start[name])
        assert same == name.startswith(frozen), name
        assert param.requires_grad == (id(param) in in_optimizer) == (not name.startswith(frozen)), name


def test_the_optimizer_and_schedule_are_fresh_unless_kept(parent: Path, tmp_path: Path) -> None:
    fresh = child_trainer(parent, tmp_path / "fresh")
    assert not fresh.optimizer.state and fresh.progress.schedule_offset == 0 and fresh.progress.step == 0

    kept = child_trainer(
        parent,
        tmp_path / "kept",
        f"train.init_from={parent}:last",
        "train.init_keep=[optimizer, schedule]",
        "train.optimizer_betas=[0.8, 0.9]",
        "train.max_steps=1",
    )
    optimizer = Checkpoint.load(RunDir(parent).last).optimizer
    assert optimizer is not None
    moments = optimizer["state"]
    assert kept.progress.schedule_offset == 20 and kept.progress.step == 0
    assert all(int(s["step"]) == 20 for s in kept.optimizer.state.values()) and len(
        kept.optimizer.state
    ) == len(moments)
    assert all(
        group["betas"] == (0.8, 0.9) for group in kept.optimizer.param_groups
    )  # the recipe's, not the parent's
    kept.fit()
    lr = events(tmp_path / "kept", "train")[0]["lr"]
    assert lr == pytest.approx(learning_rate(21, kept.cfg.train, kept.cfg.model.d_model))


@pytest.mark.parametrize(
    ("parent_layers", "child_layers", "kept"),
    [
        (3, 1, [0]),
        (3, 2, [0, 2]),
        (6, 2, [0, 5]),
        (6, 3, [0, 2, 5]),
        (12, 4, [0, 4, 7, 11]),
        (4, 4, [0, 1, 2, 3]),
    ],
)
def test_a_shallower_child_keeps_the_first_the_last_and_layers_evenly_between(
    parent_layers: int, child_layers: int, kept: list[int]
) -> None:
    assert layers_to_copy(parent_layers, child_layers) == kept


def test_a_shallower_child_starts_from_the_parents_kept_layers_and_learns(
    parent: Path, tmp_path: Path
) -> None:
    # tiny: 2 encoder and 2 decoder layers; the child keeps the decoder's first.
    trainer = child_trainer(parent, tmp_path / "child", "model.decoder_layers=1", "train.max_steps=3")
    start = Checkpoint.load(RunDir(parent).best).model
    weights = trainer.model.state_dict()
    assert not any(name.startswith("decoder.1.") for name in weights)
    for name, tensor in weights.items():
        assert torch.equal(tensor, start[name]), name  # the same name: decoder.0 is the parent's decoder.0
    assert sum(t.numel() for t in weights.values()) < sum(t.numel() for t in start.values())
    first = events(tmp_path / "child", "val")[0]
    parent_best = [e for e in events(parent, "val") if e["best"]][-1]
    assert first["step"] == 0 and first["loss"] != parent_best["loss"]  # a different model, scored
    trainer.fit()
    assert trainer.progress.step == 3
    card = Checkpoint.load(RunDir(tmp_path / "child").last).card
    assert card.model.decoder_layers == 1 and card.model.encoder_layers == 2 and card.parent is not None


def test_shrinking_renumbers_the_kept_layers_and_leaves_the_rest() -> None:
    weights = {f"decoder.{i}.w": torch.full((1,), float(i)) for i in range(3)}
    weights |= {"encoder.0.w": torch.zeros(1), "decoder_norm.weight": torch.ones(1)}
    shrunk = shrink(weights, {"decoder": [0, 2]})
    assert set(shrunk) == {"decoder.0.w", "decoder.1.w", "encoder.0.w", "decoder_norm.weight"}
    assert shrunk["decoder.1.w"].item() == 2.0 and shrunk["decoder_norm.weight"].item() == 1.0


def test_a_resumed_child_needs_no_parent_and_keeps_its_card(parent: Path, tmp_path: Path) -> None:
    copy, child = tmp_path / "parent", tmp_path / "child"
    shutil.copytree(parent, copy)
    overrides = [*SMALL, "train.val_bleu=false", f"train.init_from={copy}"]
    cfg = load_config(CONFIGS / "tiny.yaml", [*overrides, "train.max_steps=2"])
    prepare(cfg, child, log=quiet)  # `mt prepare` adopts the parent's tokenizers too
    assert file_sha256(RunDir(child).tokenizer("de")) == file_sha256(RunDir(copy).tokenizer("de"))
    train(cfg, child, resume=False, log=quiet)
    record = Checkpoint.load(RunDir(child).last).card.parent
    shutil.rmtree(copy)
    train(load_config(RunDir(child).config, ["train.max_steps=4"]), child, resume=True, log=quiet)
    assert record is not None and Checkpoint.load(RunDir(child).last).card.parent == record
    assert [e["step"] for e in events(child, "val")] == [0, 2, 4]  # update 0 is scored once


def test_freeze_names_cover_the_model() -> None:
    names = typing.get_args(typing.get_args(typing.get_type_hints(TrainConfig)["freeze"])[0])
    cfg = load_config(CONFIGS / "tiny.yaml")
    model = build_model(cfg.model, 50, 40)
    assert names == FREEZABLE == tuple(_parts(model))
    freeze(model, ["output"])  # tied: the target embedding is the output projection
    assert not model.tgt_embed.weight.requires_grad and model.src_embed.weight.requires_grad
    freeze(model, list(FREEZABLE))
    assert not any(p.requires_grad for p in model.parameters())  # the four names cover every parameter


def test_cards_with_and_without_a_parent_load() -> None:
    card = ModelCard.of(load_config(CONFIGS / "tiny.yaml"))
    saved = config_to_dict(card)
    del saved["parent"]  # as every card written before warm starts
    assert card_from_dict(saved) == card and card.parent is None
    child = replace(card, parent=ParentCard("runs/a", "runs/a/checkpoints/best.pt", "ab" * 32))
    assert card_from_dict(config_to_dict(child)) == child


def mt_train(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    base = ["--config", "tiny", *("--set", "data.train_limit=200", "--set", "train.amp=off")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mt_cli", "train", *base, "--run", "new", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--init-from", "missing"], "run directory missing does not exist"),
        (["--init-from", "{parent}:nope"], "nope.pt does not exist (checkpoints in"),
        (
            ["--init-from", "{parent}", "--set", "data.src_lang=fr"],
            "translates de->en and this config fr->en",
        ),
        (
            ["--init-from", "{parent}", "--set", "train.freeze=[encoder, embedding]"],
            "choose one of encoder, embeddings",
        ),
        (["--init-from", "{parent}", "--resume"], "--init-from starts a new run"),
        (
            ["--init-from", "{parent}", "--set", "tokenizer.tgt_vocab_size=400"],
            "tokenizer.tgt_vocab_size=400 (parent: 500)",
        ),
        (["--init-from", "{parent}", "--set", "model.d_ff=256"], "model.d_ff=256 (parent: 128)"),
        (
            ["--init-from", "{parent}", "--set", "model.encoder_layers=3"],
            "model.encoder_layers=3, but {parent} has 2; a warm start may keep fewer",
        ),
        (
            [
                "--init-from",
                "{parent}:last",
                "--set",
                "model.decoder_layers=1",
                "--set",
                "train.init_keep=[optimizer]",
            ],
            "this model keeps fewer layers than",
        ),
    ],
)
def test_bad_warm_starts_are_one_line_and_leave_nothing(
    parent: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    before = hashes(parent)
    result = mt_train(*(a.format(parent=parent) for a in args), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert message.format(parent=parent) in result.stderr
    assert not (tmp_path / "new").exists()
    assert hashes(parent) == before


def test_tokenizers_already_in_the_new_run_must_be_the_parents(parent: Path, tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "spm.en.model").write_bytes(b"another tokenizer")
    result = mt_train("--init-from", str(parent), cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "spm.en.model differs from the parent's" in result.stderr
    assert os.listdir(tmp_path / "new") == ["spm.en.model"]
    assert (tmp_path / "new" / "spm.en.model").read_bytes() == b"another tokenizer"


def test_a_one_direction_child_of_a_many_direction_parent_takes_its_tokenizers_and_weights(
    many_to_english: Path, tmp_path: Path
) -> None:
    parent_card = Checkpoint.load(RunDir(many_to_english).best).card
    parent_src, parent_tgt = parent_card.data.sides()
    assert parent_src != "de"  # several source languages: the tokenizer is named after all of them
    cfg = load_config(
        CONFIGS / "tiny.yaml",
        [*SMALL, "data.target_tags=true", f"train.init_from={many_to_english}", "train.max_steps=2"],
    )
    run = RunDir(tmp_path / "child")
    run.root.mkdir()
    found = find_parent(cfg.train.init_from, cfg, run)
    trainer = Trainer(cfg, run, prepare_data(cfg, run, Distributed(), quiet, found), Distributed(), quiet)
    trainer.start_from(found)
    parent_run = RunDir(many_to_english)
    assert run.tokenizer("de").read_bytes() == parent_run.tokenizer(parent_src).read_bytes()
    assert run.tokenizer("en").read_bytes() == parent_run.tokenizer(parent_tgt).read_bytes()
    parent_weights = Checkpoint.load(parent_run.best).model
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(tensor.float(), parent_weights[name].float()), name


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([], "reads a target-language tag (<2xx>) before its sources, and the new run would not put one"),
        (["data.target_tags=true", "data.src_lang=en", "data.tgt_lang=de"], "whose languages include en->de"),
    ],
)
def test_a_child_outside_its_parents_languages_or_tags_is_refused(
    many_to_english: Path, tmp_path: Path, overrides: list[str], message: str
) -> None:
    cfg = load_config(CONFIGS / "tiny.yaml", [*SMALL, f"train.init_from={many_to_english}", *overrides])
    with pytest.raises(CheckpointError, match=re.escape(message)):
        find_parent(cfg.train.init_from, cfg, RunDir(tmp_path / "child"))


def test_the_bidirectional_pipeline_runs_end_to_end_its_reverse_direction_back_translating(
    tmp_path: Path,
) -> None:
    small = [
        "data.train_limit=200",
        "tokenizer.src_vocab_size=500",
        "tokenizer.tgt_vocab_size=500",
        "model.d_model=64",
        "model.d_ff=128",
        "model.n_heads=2",
        "model.encoder_layers=1",
        "model.decoder_layers=1",
        "train.max_steps=3",
        "train.max_minutes=0",
        "train.lr_horizon=max_steps",
        "train.warmup_steps=1",
        "train.amp=off",
        "train.val_bleu=false",
        "train.test_at_end=false",
        "train.average_last=0",
    ]
    both, bt, fine = tmp_path / "bit", tmp_path / "bit-bt", tmp_path / "bit-finetune"
    train(load_config(CONFIGS / "multi30k-bit.yaml", small), both, resume=False, log=quiet)
    captions = CONFIGS.parent / "data" / "multi30k" / "task2" / "train.1.en.gz"
    corpora = [
        {"source": "multi30k"},
        {"source": "backtranslation", "run": str(both), "text": [str(captions)], "train_limit": 40},
    ]
    stage2 = [*small, f"train.init_from={both}", f"data.corpora={json.dumps(corpora)}"]
    train(load_config(CONFIGS / "multi30k-bit-bt.yaml", stage2), bt, resume=False, log=quiet)
    (cache,) = (both / "synthetic").iterdir()
    assert json.loads((cache / "provenance.json").read_text())["direction"] == "en->de"
    train(
        load_config(CONFIGS / "multi30k-bit-finetune.yaml", [*small, f"train.init_from={bt}"]),
        fine,
        False,
        quiet,
    )
    card = Checkpoint.load(RunDir(fine).best).card
    assert card.data.sides() == ("de", "en") and card.data.uses_target_tags()
    assert RunDir(fine).tokenizer("de").read_bytes() == RunDir(both).tokenizer("de+en").read_bytes()
