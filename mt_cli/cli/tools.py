"""Commands around trained runs: ``mt average``, ``mt bench`` and ``mt plot``."""

from __future__ import annotations

import json
from contextlib import nullcontext
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
    option,
    run_from,
    user_errors,
)
from mt_cli.disk.files import check_output_path
from mt_cli.errors import CheckpointError, InputError

RunArgument = Annotated[
    Path | None, typer.Argument(help="Run directory (the same as --run).", show_default=False)
]
LastOption = option(int, min=2, help="Average the N most recent validation checkpoints.")
FilesOption = option(list[Path] | None, "--file", "-f", help="Average these checkpoint files instead.")
AverageOption = option(
    Path | None, "--output", "-o", help="Where to write it (default: RUN/checkpoints/average.pt)."
)
BenchRunOption = option(
    Path | None,
    "--run",
    "-r",
    "--run-dir",
    help="Measure this trained run (default: the config's model, random weights).",
)
SentencesOption = option(int | None, min=1, help="Translate the first N test2016 sentences (default: all).")
RepeatsOption = option(int, min=1, help="Timed repeats of the training batches.")
DecodeRepeatsOption = option(int, min=1, help="Timed repeats of the translation pass.")
BatchesOption = option(int, min=1, help="Training batches (train.max_tokens each) per timed repeat.")
BenchBeamOption = option(int, min=2, help="Beam size of the beam-search row.")
EnginesOption = option(
    bool,
    help="Compare engines on a trained --run: mt, CTranslate2 float32/int8, Hugging Face (greedy, --beam).",
)
ReportOption = option(Path | None, "--output", "-o", help="Also write the report to this JSON file.")
PlotOption = option(Path | None, "--output", "-o", help="PNG to write (default: RUN/curves.png).")


@user_errors
def average(
    run_argument: RunArgument = None,
    run: RunOption = DEFAULT_RUN,
    last: LastOption = 5,
    files: FilesOption = None,
    output: AverageOption = None,
) -> None:
    """Average checkpoint parameters into a new checkpoint (use it with --checkpoint average)."""
    from mt_cli.disk.layout import RunDir
    from mt_cli.disk.runlock import RunLock, writes_into

    rundir = RunDir(run_from(run_argument, run))
    if not files:
        rundir.existing()
    if not files and not rundir.checkpoints.is_dir():
        raise CheckpointError(f"{rundir.root} is not a trained run (no checkpoints/); give --run or --file")
    target = output or rundir.average
    # The run's lock, as training holds it: training writes average.pt and deletes old step checkpoints.
    in_run = rundir.root.is_dir() and (not files or writes_into(rundir.root, target))
    with RunLock(rundir.lock, "average") if in_run else nullcontext():
        check_output_path(target, "--output")
        paths = list(files) if files else rundir.step_checkpoints()[-last:]
        if not files and len(paths) < last:
            raise CheckpointError(
                f"{rundir.checkpoints} has {len(paths)} validation checkpoints; --last {last} needs that many"
            )
        from mt_cli.checkpoint import average_checkpoints  # torch: only once the paths are known good

        typer.echo(f"averaged {len(paths)} checkpoints into {average_checkpoints(paths, target)}")


@user_errors
def bench(
    config: ConfigOption = DEFAULT_RECIPE,
    overrides: SetOption = None,
    run: BenchRunOption = None,
    checkpoint: CheckpointOption = None,
    sentences: SentencesOption = None,
    repeats: RepeatsOption = 5,
    decode_repeats: DecodeRepeatsOption = 3,
    batches: BatchesOption = 8,
    beam: BenchBeamOption = 5,
    device: DeviceOption = "auto",
    as_json: JsonOption = False,
    output: ReportOption = None,
    engines: EnginesOption = False,
) -> None:
    """Measure training and translation speed and memory against a textbook nn.Transformer, or
    (--engines) a run's translation speed, BLEU, size and memory in mt and in each export."""
    from mt_cli.disk.files import write_json
    from mt_cli.tools.bench import BenchPlan, run_bench
    from mt_cli.tools.timing import format_report

    if output is not None:
        check_output_path(output, "--output")
    if engines:
        from mt_cli.tools.engines import format_engine_report, run_engine_bench

        if run is None:
            raise InputError("--engines needs --run: the trained model to export and compare")
        report = run_engine_bench(run, checkpoint, sentences, (1, beam), log)
        if output is not None:
            write_json(report, output)
        typer.echo(json.dumps(report, indent=2) if as_json else "\n".join(format_engine_report(report)))
        return
    plan = BenchPlan(sentences, repeats, decode_repeats, batches, beam)
    report = run_bench(config, overrides or [], run, checkpoint, device, plan, log=log)
    if output is not None:
        write_json(report, output)
    typer.echo(json.dumps(report, indent=2) if as_json else "\n".join(format_report(report)))


@user_errors
def plot(run_argument: RunArgument = None, run: RunOption = DEFAULT_RUN, output: PlotOption = None) -> None:
    """Plot training curves (loss, validation BLEU, learning rate, throughput) into one PNG."""
    from mt_cli.disk.layout import RunDir
    from mt_cli.tools.plots import read_metrics

    run_dir = run_from(run_argument, run)
    read_metrics(run_dir)  # a run that is not there, or has nothing to plot: said first
    check_output_path(output or RunDir(run_dir).curves, "--output" if output else "--output (default)")
    from mt_cli.tools.plots import plot_curves  # matplotlib: only once the output is known good

    typer.echo(f"training curves written to {plot_curves(run_dir, output)}")


def register(app: typer.Typer) -> None:
    for command in (average, bench, plot):
        app.command()(command)
