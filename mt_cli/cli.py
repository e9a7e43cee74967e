"""The ``mt`` command line: argument parsing and calls, nothing else.

Heavy modules (torch, datasets, matplotlib) are imported inside the commands that need them,
so ``mt --help`` and ``mt translate`` start fast. Every ``MtError`` becomes one line on stderr
and exit code 2.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from mt_cli.config import Config, load_config
from mt_cli.errors import InputError, MtError

app = typer.Typer(
    help="Train, run and score a Transformer for German-English translation (Multi30k).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DEFAULT_CONFIG = Path("configs/multi30k.yaml")
DEFAULT_RUN = Path(Config().run_dir)
F = TypeVar("F", bound=Callable)

ConfigOption = Annotated[Path, typer.Option("--config", "-c", help="YAML recipe.")]
SetOption = Annotated[
    list[str] | None, typer.Option("--set", "-s", help="Override a config key: section.key=value (repeatable).")
]
RunOption = Annotated[Path, typer.Option("--run", "-r", help="Run directory of a trained model.")]
CheckpointOption = Annotated[
    str | None, typer.Option("--checkpoint", help="Checkpoint file or name in the run (default: best.pt).")
]
DeviceOption = Annotated[str, typer.Option("--device", help="auto | cpu | cuda.")]
BeamOption = Annotated[int | None, typer.Option("--beam", "-b", min=1, help="Beam size (1 = greedy; default: the recipe's).")]
LengthPenaltyOption = Annotated[float | None, typer.Option(
    "--length-penalty", min=0.0, help="GNMT length penalty alpha for beam search (0 = off; default: the recipe's).")]


def fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def user_errors(command: F) -> F:
    """Turn an MtError raised anywhere below a command into one line on stderr and exit 2."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except MtError as err:
            fail(str(err))

    return wrapper  # type: ignore[return-value]


def warn(message: str) -> None:
    typer.echo(f"warning: {message}", err=True)


@app.command()
@user_errors
def prepare(config: ConfigOption = DEFAULT_CONFIG, overrides: SetOption = None,
            run_dir: Annotated[Path | None, typer.Option(help="Run directory (default: the config's run_dir).")] = None) -> None:
    """Load the corpus and train (or reuse) both tokenizers; report sizes and coverage."""
    from mt_cli.preparation import describe_preparation

    cfg = load_config(config, overrides or [])
    for line in describe_preparation(cfg, run_dir or Path(cfg.run_dir), log=typer.echo):
        typer.echo(line)


@app.command()
@user_errors
def train(
    config: ConfigOption = DEFAULT_CONFIG,
    overrides: SetOption = None,
    run_dir: Annotated[Path | None, typer.Option(help="Run directory (default: the config's run_dir).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue from the run's last.pt, with the run's saved config.")] = False,
) -> None:
    """Train a model: tokenizers, training with validation, checkpoints, then test scores."""
    from mt_cli.training import Interrupted
    from mt_cli.training import train as run_training

    if resume:
        saved = (run_dir or Path(load_config(config).run_dir)) / "config.yaml"
        if not saved.exists():
            fail(f"cannot resume: {saved} does not exist (start without --resume)")
        cfg = load_config(saved, overrides or [])
    else:
        cfg = load_config(config, overrides or [])
    try:
        report = run_training(cfg, run_dir or Path(cfg.run_dir), resume=resume, log=typer.echo)
    except Interrupted as stop:
        typer.echo(str(stop), err=True)
        raise typer.Exit(130) from None
    if report and report["scores"]:
        typer.echo(f"\n{report['split']} ({report['updates']} updates, {report['training_minutes']} min of training)")
        typer.echo(f"{'decoding':<10}{'BLEU':>8}{'chrF':>8}{'sent/s':>9}")
        for name, s in report["scores"].items():
            typer.echo(f"{name:<10}{s['bleu']:>8.2f}{s['chrf']:>8.2f}{s['sentences_per_second']:>9.1f}")
        typer.echo(f"scores and signatures: {Path(cfg.run_dir if run_dir is None else run_dir) / 'test.json'}")


def read_input(text: str | None, input_file: Path | None) -> list[str]:
    from mt_cli.corpus import read_lines, text_lines

    if text is not None and input_file is not None:
        raise InputError("give either a text argument or --input, not both")
    if text is not None:
        return text_lines(text) or [""]
    if input_file is not None:
        return read_lines(input_file)
    try:
        return text_lines(sys.stdin.buffer.read().decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError("standard input is not UTF-8 text") from None


@app.command()
@user_errors
def translate(
    text: Annotated[str | None, typer.Argument(help="Text to translate (default: read stdin, one sentence per line).")] = None,
    run: RunOption = DEFAULT_RUN,
    checkpoint: CheckpointOption = None,
    beam: BeamOption = None,
    length_penalty: LengthPenaltyOption = None,
    n_best: Annotated[int, typer.Option(min=1, help="Print the N best hypotheses per line (Moses n-best format).")] = 1,
    input_file: Annotated[Path | None, typer.Option("--input", "-i", help="Read sentences from this file.")] = None,
    output_file: Annotated[Path | None, typer.Option("--output", "-o", help="Write translations to this file.")] = None,
    attention: Annotated[Path | None, typer.Option(help="Save a cross-attention heatmap (PNG) of the first line.")] = None,
    device: DeviceOption = "auto",
) -> None:
    """Translate text: one output line per input line, in order."""
    from mt_cli.translator import Translator

    lines = read_input(text, input_file)
    translator = Translator.from_run(run, checkpoint, device).with_length_penalty(length_penalty)
    beam_size = translator.config.decode.beam_size if beam is None else beam
    if n_best > beam_size:
        raise InputError(f"--n-best {n_best} cannot exceed the beam size {beam_size}")
    hyps = translator.translate(lines, beam_size=beam_size, n_best=n_best, warn=warn)
    if n_best == 1:
        out = translator.tgt_tok.decode([h[0].tokens for h in hyps])
    else:
        out = [f"{i} ||| {text} ||| {h.score:.4f}" for i, line_hyps in enumerate(hyps)
               for h, text in zip(line_hyps, translator.tgt_tok.decode([h.tokens for h in line_hyps]))]
    if attention is not None:
        from mt_cli.plots import plot_attention

        plot_attention(*translator.attention(lines[0], hyps[0][0].tokens), attention)
        warn(f"attention heatmap written to {attention}")
    if output_file is not None:
        output_file.write_text("".join(line + "\n" for line in out), encoding="utf-8")
    else:
        for line in out:
            typer.echo(line)


@app.command("eval")
@user_errors
def evaluate(
    bleu: Annotated[bool, typer.Option("--bleu/--no-bleu", help="Report sacreBLEU (default); --no-bleu prints chrF only.")] = True,
    run: RunOption = DEFAULT_RUN,
    split: Annotated[str, typer.Option(help="Split to score: val, test2016, test2017, mscoco2017, test2018.")] = "test2016",
    src: Annotated[Path | None, typer.Option(help="Score on this source file instead of a split (needs --ref).")] = None,
    ref: Annotated[Path | None, typer.Option(help="Reference translations for --src.")] = None,
    beam: BeamOption = None,
    length_penalty: LengthPenaltyOption = None,
    checkpoint: CheckpointOption = None,
    device: DeviceOption = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of text.")] = False,
    output_file: Annotated[Path | None, typer.Option("--output", "-o", help="Write the hypotheses to this file.")] = None,
) -> None:
    """Score a trained run with sacreBLEU (detokenized, cased) and chrF."""
    from mt_cli.evaluation import evaluate_run

    result = evaluate_run(run, split, src, ref, beam, length_penalty, checkpoint, device)
    if output_file is not None:
        output_file.write_text("".join(h + "\n" for h in result.evaluation.hypotheses), encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2))
        return
    s = result.evaluation.scores
    seconds = result.evaluation.seconds
    typer.echo(f"{result.name}: {s.sentences} sentences, beam {result.beam}, length penalty {result.length_penalty}, {seconds:.1f} s "
               f"({s.sentences / max(seconds, 1e-9):.1f} sentences/s)")
    if bleu:
        typer.echo(f"BLEU = {s.bleu:.2f}  ({s.bleu_signature})")
    typer.echo(f"chrF = {s.chrf:.2f}  ({s.chrf_signature})")


@app.command()
@user_errors
def average(
    run: Annotated[Path, typer.Argument(help="Run directory whose checkpoints to average.")],
    last: Annotated[int, typer.Option(min=2, help="Average the N most recent validation checkpoints.")] = 5,
    files: Annotated[list[Path] | None, typer.Option("--file", "-f", help="Average these checkpoint files instead.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Where to write it (default: RUN/checkpoints/average.pt).")] = None,
) -> None:
    """Average checkpoint parameters into a new checkpoint (use it with --checkpoint)."""
    from mt_cli.checkpoint import RunDir, average_checkpoints

    rundir = RunDir(run)
    paths = list(files) if files else rundir.step_checkpoints()[-last:]
    if not files and len(paths) < last:
        fail(f"{rundir.checkpoints} has {len(paths)} validation checkpoints; --last {last} needs that many")
    written = average_checkpoints(paths, output or rundir.checkpoints / "average.pt")
    typer.echo(f"averaged {len(paths)} checkpoints into {written}")


@app.command()
@user_errors
def bench(
    config: ConfigOption = DEFAULT_CONFIG,
    overrides: SetOption = None,
    run: Annotated[Path | None, typer.Option("--run", "-r", help="Measure this trained run (its best.pt, tokenizers and recipe; --config is then not used). Default: the config's model with random weights.")] = None,
    sentences: Annotated[int | None, typer.Option(min=1, help="Translate the first N test2016 sentences (default: all).")] = None,
    repeats: Annotated[int, typer.Option(min=1, help="Timed repeats of the training batches.")] = 5,
    decode_repeats: Annotated[int, typer.Option(min=1, help="Timed repeats of the translation pass.")] = 3,
    batches: Annotated[int, typer.Option(min=1, help="Training batches (train.max_tokens each) per timed repeat.")] = 8,
    beam: Annotated[int, typer.Option(min=2, help="Beam size of the beam-search row.")] = 5,
    device: DeviceOption = "auto",
    json_file: Annotated[Path | None, typer.Option("--json", help="Also write all numbers to this JSON file.")] = None,
) -> None:
    """Measure training and translation speed and memory against a textbook nn.Transformer."""
    from mt_cli.bench import format_report, run_bench
    from mt_cli.checkpoint import write_json

    report = run_bench(config, overrides or [], run, device, sentences, repeats, decode_repeats, batches, beam,
                       log=lambda message: typer.echo(message, err=True))  # fmt: skip
    for line in format_report(report):
        typer.echo(line)
    if json_file is not None:
        write_json(report, json_file)


@app.command()
@user_errors
def plot(
    run: Annotated[Path, typer.Argument(help="Run directory with a metrics.jsonl written by `mt train`.")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="PNG to write (default: RUN/curves.png).")] = None,
) -> None:
    """Plot training curves (loss, validation BLEU, learning rate, throughput) into one PNG."""
    from mt_cli.plots import plot_curves

    typer.echo(f"training curves written to {plot_curves(run, output)}")


def main() -> None:
    app()
