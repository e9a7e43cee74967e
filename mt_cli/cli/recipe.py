"""Commands that start from a recipe: ``mt prepare``, ``mt train`` and ``mt config``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer

from mt_cli.cli.common import (
    DEFAULT_RECIPE,
    ConfigOption,
    OptionalRunOption,
    SetOption,
    fail,
    log,
    user_errors,
)
from mt_cli.config.recipe import load_config
from mt_cli.config.sections import Config
from mt_cli.disk.layout import RunDir
from mt_cli.errors import EXIT_INTERRUPTED, CheckpointError, ConfigError, InputError


@user_errors
def prepare(
    config: ConfigOption = DEFAULT_RECIPE, overrides: SetOption = None, run: OptionalRunOption = None
) -> None:
    """Load the corpus and train (or reuse) both tokenizers; report sizes and coverage."""
    from mt_cli.train.run import prepare as prepare_run
    from mt_cli.train.warm_start import parent_sections

    cfg = load_config(config, overrides or [], parent_sections)
    for line in prepare_run(cfg, run or Path(cfg.run_dir), log=log):
        typer.echo(line)


@user_errors
def train(
    ctx: typer.Context,
    config: ConfigOption = DEFAULT_RECIPE,
    overrides: SetOption = None,
    run: OptionalRunOption = None,
    resume: Annotated[
        bool,
        typer.Option(
            help="Continue from the run's last.pt, with the run's saved config. `--resume auto`: "
            "continue when the run has a last.pt, else start (the default under torchrun, so that "
            "a restarted worker group goes on).",
        ),
    ] = False,
    device: Annotated[
        str | None, typer.Option("--device", help="auto | cpu | cuda (default: train.device).")
    ] = None,
    init_from: Annotated[
        str | None,
        typer.Option(
            "--init-from",
            metavar="RUN[:CHECKPOINT]|hf:OWNER/NAME|DIR",
            help="Start a new run from another run's weights and tokenizers (train.init_from; "
            "checkpoint default: best), or from a published Marian model (imported as by `mt import`). "
            "The recipe's model and tokenizer sections default to the parent's.",
        ),
    ] = None,
) -> None:
    """Train a model: tokenizers, training with validation, checkpoints, then test scores.

    Logs go to stderr and RUN/train.log; the closing scores to stdout and RUN/test.json.
    """
    from mt_cli.train.resuming import decide
    from mt_cli.train.run import train as run_training
    from mt_cli.train.trainer import Interrupted

    asked = _resume_asked(resume, ctx.args)
    if init_from is not None and asked == "last":
        raise ConfigError(
            "--init-from starts a new run from another one and --resume continues this run: give one of them"
        )
    overrides = list(overrides or []) + ([f"train.device={device}"] if device is not None else [])
    # JSON quotes the value, a YAML string whatever it holds (a run named 1 or null stays a name).
    overrides += [f"train.init_from={json.dumps(init_from)}"] if init_from is not None else []
    from mt_cli.train.warm_start import parent_sections

    def resumed_run() -> Path:  # as ever for --resume: --run, else the recipe's own run_dir
        return run or Path(load_config(config).run_dir)

    start = decide(asked, resumed_run)
    cfg = (
        _resumed_config(resumed_run(), overrides)
        if start.resume
        else load_config(config, overrides, parent_sections)
    )
    run_dir = run or Path(cfg.run_dir)
    try:
        report = run_training(cfg, run_dir, resume=start.resume, log=log, auto=start.auto)
    except Interrupted as stop:
        fail(str(stop), EXIT_INTERRUPTED)
    if report and report["scores"]:
        typer.echo(
            f"{report['split']} ({report['updates']} updates, {report['training_minutes']} min of training)"
        )
        typer.echo(f"{'decoding':<10}{'BLEU':>8}{'chrF':>8}{'sent/s':>9}")
        for name, s in report["scores"].items():
            typer.echo(f"{name:<10}{s['bleu']:>8.2f}{s['chrf']:>8.2f}{s['sentences_per_second']:>9.1f}")
        typer.echo(f"scores and signatures: {RunDir(run_dir).test_scores}")


def _resume_asked(resume: bool, words: list[str]) -> Literal["last", "auto"] | None:
    """``--resume`` alone ("last"), ``--resume auto``, or neither (None). Typer's options take a
    value always or never, so ``auto`` arrives as the command's one extra word."""
    if words and (words != ["auto"] or not resume):
        raise InputError(
            f"unexpected argument {' '.join(words)!r}: `mt train` takes options only (`--resume auto`)"
        )
    return "auto" if words else "last" if resume else None


def _resumed_config(run_dir: Path, overrides: list[str]) -> Config:
    saved = RunDir(run_dir).config
    if not saved.is_file():
        raise CheckpointError(f"cannot resume: {saved} does not exist (start without --resume)")
    return load_config(saved, overrides)


@user_errors
def config(config: ConfigOption = DEFAULT_RECIPE, overrides: SetOption = None) -> None:
    """Print the resolved config of a recipe with its overrides (YAML), without training."""
    import yaml

    from mt_cli.config.recipe import config_to_dict

    cfg = load_config(config, overrides or [])
    typer.echo(yaml.safe_dump(config_to_dict(cfg), sort_keys=False, allow_unicode=True), nl=False)


def register(app: typer.Typer) -> None:
    app.command()(prepare)
    app.command(context_settings={"allow_extra_args": True})(train)  # the `auto` of `--resume auto`
    app.command()(config)
