"""layout: the names of a run directory's files, and how a run and checkpoint are named together."""

from __future__ import annotations

from pathlib import Path

import pytest

from mt_cli.disk.layout import RunDir, run_and_checkpoint, tokenizer_file
from mt_cli.errors import CheckpointError


def test_a_run_is_named_with_or_without_a_checkpoint(tmp_path: Path) -> None:
    assert run_and_checkpoint("runs/b") == (Path("runs/b"), None)
    assert run_and_checkpoint("runs/b:last") == (Path("runs/b"), "last")
    assert run_and_checkpoint("runs/b:/tmp/x.pt") == (Path("runs/b"), "/tmp/x.pt")
    odd = tmp_path / "a:b"
    odd.mkdir()
    assert run_and_checkpoint(odd) == (odd, None)  # an existing path is a run, colon or not
    assert run_and_checkpoint(str(odd)) == (odd, None)


def test_a_checkpoint_file_alone_is_no_run_and_the_error_says_how_to_name_it(tmp_path: Path) -> None:
    checkpoint = tmp_path / "run" / "checkpoints" / "last.pt"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_bytes(b"weights")
    with pytest.raises(CheckpointError, match=f"give RUN:CHECKPOINT \\({tmp_path / 'run'}:last\\)"):
        run_and_checkpoint(checkpoint)
    loose = tmp_path / "model.pt"
    loose.write_bytes(b"weights")
    with pytest.raises(CheckpointError, match="is a checkpoint file, not a run directory"):
        run_and_checkpoint(str(loose))


def test_run_files_sit_where_the_reference_says(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    assert run.best == tmp_path / "checkpoints" / "best.pt"
    assert run.step_checkpoint(12) == tmp_path / "checkpoints" / "step0000012.pt"
    assert run.tokenizer("de") == tmp_path / tokenizer_file("de") == tmp_path / "spm.de.model"
    assert run.lock == tmp_path / ".lock"
    assert run.curves == tmp_path / "curves.png"
    assert run.exports == tmp_path / "exports"


def test_exports_have_their_names_in_the_run(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    assert run.export("ctranslate2", "int8") == tmp_path / "exports" / "ctranslate2-int8"
    assert run.export("huggingface", "float32") == tmp_path / "exports" / "huggingface"
    assert run.export("argos", "int8") == tmp_path / "exports" / "argos-int8.argosmodel"
    sha256 = "0123456789abcdef" * 4
    assert run.engine_export(sha256) == tmp_path / "exports" / "ctranslate2-0123456789ab"


def test_the_reference_lists_every_name_of_a_run() -> None:
    reference = (Path(__file__).parents[1] / "docs" / "reference.md").read_text(encoding="utf-8")
    listing = reference.split("## The run directory\n")[1].split("```")[1]
    names = [value.relative for value in vars(RunDir).values() if hasattr(value, "relative")]
    assert {"curves.png", "exports", "checkpoints/best.pt"} <= set(names)
    assert [name for name in names if Path(name).name not in listing] == []


def test_no_such_run_is_one_message(tmp_path: Path) -> None:
    from mt_cli.decode.translator import Translator
    from mt_cli.export.runs import ctranslate2_model_dir
    from mt_cli.trained import load_trained

    missing = tmp_path / "typo"
    message = f"run directory {missing} does not exist; train one with `mt train --run {missing}`"
    for attempt in (
        lambda: RunDir(missing).existing(),
        lambda: Translator.of(load_trained(missing)),
        lambda: ctranslate2_model_dir(missing, None),
    ):
        with pytest.raises(CheckpointError) as err:
            attempt()
        assert str(err.value) == message
    (tmp_path / "file").write_text("")
    with pytest.raises(CheckpointError, match="does not exist"):  # a file is no run either
        RunDir(tmp_path / "file").existing()
    assert RunDir(tmp_path).existing() == RunDir(tmp_path)


def test_a_missing_checkpoint_lists_the_ones_there(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.checkpoints.mkdir()
    run.last.write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"best\.pt does not exist .*: last\); use --checkpoint last"):
        run.find_checkpoint(None)
    with pytest.raises(CheckpointError, match="give one of those names"):
        run.find_checkpoint("average")
    assert run.find_checkpoint("last") == run.last
