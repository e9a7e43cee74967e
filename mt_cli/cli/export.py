"""``mt export``: a trained run as a CTranslate2 model, a Hugging Face Marian model or an Argos
Translate package, for use outside mt."""

from __future__ import annotations

import enum
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from mt_cli.cli.common import DEFAULT_RUN, CheckpointOption, RunOption, log, option, user_errors
from mt_cli.export.quantization import Quantization

if TYPE_CHECKING:
    from mt_cli.trained import TrainedModel


class ExportFormat(str, enum.Enum):
    CTRANSLATE2 = "ctranslate2"
    HUGGINGFACE = "huggingface"
    ARGOS = "argos"


FormatOption = option(ExportFormat, "--format", "-f", help="What to write.")
ExportOutputOption = option(
    Path | None,
    "--output",
    "-o",
    help="Directory (argos: a .argosmodel file) to write; it must not exist (default: RUN/exports/FORMAT).",
)
QuantizationOption = option(
    Quantization, help="CTranslate2 weight type (ctranslate2 and argos): int8 is ~4x smaller and faster."
)


@user_errors
def export(
    export_format: FormatOption,
    run: RunOption = DEFAULT_RUN,
    checkpoint: CheckpointOption = None,
    output: ExportOutputOption = None,
    quantization: QuantizationOption = Quantization.FLOAT32,
) -> None:
    """Export a trained run for CTranslate2, Hugging Face transformers or Argos Translate / LibreTranslate.

    Exit codes: 2 for a bad run, output or option, or a run another mt command is writing; 3 if
    the output cannot be written midway (disk full). Only the output is written: no checkpoint changes.
    """
    from mt_cli.disk.files import check_output_path, writing
    from mt_cli.disk.layout import RunDir
    from mt_cli.disk.runlock import RunLock, writes_into

    rundir = RunDir(run).existing()  # before anything is made: a typo in --run creates nothing
    rundir.find_checkpoint(checkpoint)
    target = output if output is not None else _default_output(run, export_format, quantization)
    # Writing into the run (its exports/ by default) takes the run's lock, as training does.
    with RunLock(rundir.lock, "export") if writes_into(run, target) else nullcontext():
        if output is None:
            with writing(target.parent):
                target.parent.mkdir(exist_ok=True)
        check_output_path(target, "--output")
        from mt_cli.trained import load_trained  # torch: only once the paths are known good

        trained = load_trained(run, checkpoint)  # fp32 on the CPU: an exact export, no decoder
        written = _write(export_format, trained, target, quantization)
    log(f"{export_format.value} export of {trained.checkpoint} written to {written}")
    typer.echo(str(written))


def _default_output(run: Path, export_format: ExportFormat, quantization: Quantization) -> Path:
    from mt_cli.disk.layout import RunDir

    return RunDir(run).export(export_format.value, quantization.value)


def _write(
    export_format: ExportFormat, trained: TrainedModel, target: Path, quantization: Quantization
) -> Path:
    if export_format is ExportFormat.CTRANSLATE2:
        from mt_cli.export.ctranslate2 import export_ctranslate2

        return export_ctranslate2(trained, target, quantization)
    if export_format is ExportFormat.HUGGINGFACE:
        from mt_cli.export.huggingface import export_huggingface

        return export_huggingface(trained, target)
    from mt_cli.export.argos import export_argos

    return export_argos(trained, target, quantization)


def register(app: typer.Typer) -> None:
    app.command()(export)
