"""Commands around trained runs: ``mt average``, ``mt bench`` and ``mt plot``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from mt_cli.cli.common import (
    DEFAULT_RECIPE,
    DEFAULT_RUN,
    CheckpointOption,
    ConfigOption,
    DeviceOption,
    JsonOption,
    RunOption,
    SetOption,
    log,
    run_from,
    user_errors,
)
from mt_cli.errors import CheckpointError
from mt_cli.files import check_output_path

RunArgument = Annotated[
    Path | None, typer.Argument(help="Run directory (the same as --run).", show_default=False)
]


@user_errors
def average(
    run_argument: RunArgument = None,
    run: RunOption = DEFAULT_RUN,
    last: Annotated[int, typer.Option(min=2, help="Average the N most recent validation checkpoints.")] = 5,
    files: Annotated[
        list[Path] | None, typer.Option("--file", "-f", help="Average these checkpoint files instead.")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Where to write it (default: RUN/checkpoints/average.pt)."),
    ] = None,
) -> None:
    """Average checkpoint parameters into a new checkpoint (use it with --checkpoint average)."""
    from mt_cli.checkpoint import RunDir, average_checkpoints

    rundir = RunDir(run_from(run_argument, run))
    if not files and not rundir.root.is_dir():
        raise CheckpointError(f"run directory {rundir.root} does not exist; give --run or --file")
    if not files and not rundir.checkpoints.is_dir():
        raise CheckpointError(f"{rundir.root} is not a trained run (no checkpoints/); give --run or --file")
    target = output or rundir.checkpoints / "average.pt"
    check_output_path(target, "--output")
    paths = list(files) if files else rundir.step_checkpoints()[-last:]
    if not files and len(paths) < last:
        raise CheckpointError(
            f"{rundir.checkpoints} has {len(paths)} validation checkpoints; --last {last} needs that many"
        )
    typer.echo(f"averaged {len(paths)} checkpoints into {average_checkpoints(paths, target)}")


@user_errors
def bench(
    config: ConfigOption = DEFAULT_RECIPE,
    overrides: SetOption = None,
    run: Annotated[
        Path | None,
        typer.Option(
            "--run",
            "-r",
            "--run-dir",
            help="Measure this trained run (default: the config's model, random weights).",
        ),
    ] = None,
    checkpoint: CheckpointOption = None,
    sentences: Annotated[
        int | None, typer.Option(min=1, help="Translate the first N test2016 sentences (default: all).")
    ] = None,
    repeats: Annotated[int, typer.Option(min=1, help="Timed repeats of the training batches.")] = 5,
    decode_repeats: Annotated[int, typer.Option(min=1, help="Timed repeats of the translation pass.")] = 3,
    batches: Annotated[
        int, typer.Option(min=1, help="Training batches (train.max_tokens each) per timed repeat.")
    ] = 8,
    beam: Annotated[int, typer.Option(min=2, help="Beam size of the beam-search row.")] = 5,
    device: DeviceOption = "auto",
    as_json: JsonOption = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Also write the report to this JSON file.")
    ] = None,
) -> None:
    """Measure training and translation speed and memory against a textbook nn.Transformer."""
    from mt_cli.bench import format_report, run_bench
    from mt_cli.files import write_json

    if output is not None:
        check_output_path(output, "--output")
    report = run_bench(
        config,
        overrides or [],
        run,
        checkpoint,
        device,
        sentences,
        repeats,
        decode_repeats,
        batches,
        beam,
        log=log,
    )
    if output is not None:
        write_json(report, output)
    typer.echo(json.dumps(report, indent=2) if as_json else "\n".join(format_report(report)))


@user_errors
def plot(
    run_argument: RunArgument = None,
    run: RunOption = DEFAULT_RUN,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="PNG to write (default: RUN/curves.png).")
    ] = None,
) -> None:
    """Plot training curves (loss, validation BLEU, learning rate, throughput) into one PNG."""
    from mt_cli.plots import plot_curves

    if output is not None:
        check_output_path(output, "--output")
    typer.echo(f"training curves written to {plot_curves(run_from(run_argument, run), output)}")


def register(app: typer.Typer) -> None:
    for command in (average, bench, plot):
        app.command()(command)
