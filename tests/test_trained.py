"""The trained-model loader (``trained``) and the typed checkpoint (``checkpoint.Checkpoint``):
what every consumer loads, and every way a run or a checkpoint can be wrong, in one line."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mt_cli.checkpoint import Checkpoint
from mt_cli.decode.translator import Translator
from mt_cli.disk.layout import RunDir
from mt_cli.errors import CheckpointError
from mt_cli.runtime.precision import ComputeType
from mt_cli.trained import TrainedModel, load_trained


def one_line(err: pytest.ExceptionInfo[CheckpointError]) -> str:
    message = str(err.value)
    assert "\n" not in message and "Traceback" not in message, message
    return message


def test_the_loader_gives_the_weights_the_translator_decodes_with(trained_run: Path) -> None:
    trained = load_trained(trained_run)
    assert isinstance(trained, TrainedModel) and trained.checkpoint == RunDir(trained_run).best
    assert not trained.model.training  # ready for inference, fp32 on the CPU
    saved = Checkpoint.load(RunDir(trained_run).best).model
    translator = Translator.of(load_trained(trained_run), "cpu", ComputeType.FLOAT32)
    ours, theirs = trained.model.state_dict(), translator.model.state_dict()
    assert ours.keys() == theirs.keys() == saved.keys()
    for name, tensor in ours.items():
        assert tensor.dtype == torch.float32 and tensor.device.type == "cpu", name
        assert torch.equal(tensor, theirs[name]) and torch.equal(tensor, saved[name]), name
    assert translator.card == trained.card and translator.checkpoint == trained.checkpoint
    assert translator.tokenizers == Translator.of(trained, "cpu", ComputeType.FLOAT32).tokenizers
    assert Translator.of(trained, "cpu", ComputeType.FLOAT32).model is trained.model  # taken over, not copied


def test_a_named_checkpoint_is_found_in_the_run(trained_run: Path) -> None:
    assert load_trained(trained_run, "last").checkpoint == RunDir(trained_run).last


def test_a_truncated_checkpoint_is_one_line(trained_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    best = RunDir(run).best
    data = best.read_bytes()
    best.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="damaged or truncated") as err:
        load_trained(run)
    assert str(best) in one_line(err)


def test_a_missing_run_or_checkpoint_is_one_line(trained_run: Path, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="run directory .* does not exist") as err:
        load_trained(tmp_path / "nowhere")
    one_line(err)
    with pytest.raises(CheckpointError, match="step9999999.pt does not exist") as err:
        load_trained(trained_run, "step9999999")
    one_line(err)


def test_weights_that_do_not_fit_the_tokenizers_are_one_line(trained_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    best = RunDir(run).best
    saved = Checkpoint.load(best)
    saved.model = {name: t[:-1] if name == "tgt_embed.weight" else t for name, t in saved.model.items()}
    saved.save(best)
    with pytest.raises(CheckpointError, match="does not match the tokenizers") as err:
        load_trained(run)
    one_line(err)


def test_what_is_not_an_mt_checkpoint_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.pt"
    for payload in ([1, 2], {"weights": {}}, {"model": [0.5], "config": {}}):
        torch.save(payload, path)
        with pytest.raises(CheckpointError, match="not an mt checkpoint") as err:
            Checkpoint.load(path)
        one_line(err)


def test_a_checkpoint_keeps_what_it_holds(trained_run: Path, tmp_path: Path) -> None:
    last = Checkpoint.load(RunDir(trained_run).last)
    assert last.step is not None and last.config is not None and last.optimizer is not None
    optimizer, scaler, progress, rng = last.training_state(RunDir(trained_run).last)
    assert progress["step"] == last.step and "torch" in rng and "state" in optimizer and scaler is not None
    copy = tmp_path / "copy.pt"
    last.save(copy)
    again = Checkpoint.load(copy)
    assert again.card == last.card and again.step == last.step and again.progress == last.progress
    assert all(torch.equal(again.model[name], tensor) for name, tensor in last.model.items())
    best = Checkpoint.load(RunDir(trained_run).best)  # weights, card, recipe: no training state
    assert best.optimizer is None and best.rng is None
    with pytest.raises(CheckpointError, match="has no optimizer state; it cannot be resumed"):
        best.training_state(RunDir(trained_run).best)


def test_exporting_needs_no_decoder() -> None:
    # The exporters read a TrainedModel: loading them must not load the decoder (nor search).
    code = (
        "import sys\n"
        "import mt_cli.export.argos, mt_cli.export.huggingface, mt_cli.export.runs, mt_cli.trained\n"
        "print(sorted(m for m in sys.modules if m.startswith('mt_cli.decode')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
