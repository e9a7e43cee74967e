"""The ``mt`` command line: argument parsing and calls, nothing else.

One module per group of commands: ``recipe`` (prepare, train, config), ``translation``
(translate, eval), ``scoring`` (score), ``tools`` (average, bench, plot), ``export`` (export),
``importing`` (import: a published Marian model as a run) and ``serve`` (serve). What they
share: ``common`` (the app, option types, logging, one line and an exit code per error),
``engines`` (``ModelChoice``: ``--run``, ``--engine``, ``--ensemble`` and the other options that
open the model a command decodes with, declared once), ``documents`` (``mt translate``'s input:
chunks of lines, ``--format``), ``decoding`` (decoding options and how results are printed) and
``comparison`` (``mt eval --hyp A --hyp B``'s table). Heavy modules (torch, datasets,
matplotlib) are imported inside the commands that need them, so ``mt --help`` starts fast.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from mt_cli.cli import export, importing, recipe, scoring, serve, tools, translation
from mt_cli.cli.common import app
from mt_cli.errors import EXIT_INTERRUPTED, EXIT_USAGE
from mt_cli.version import __version__


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"mt {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_print_version, is_eager=True, help="Print mt's version and exit."
        ),
    ] = False,
) -> None:
    """Train, run and score a Transformer translator (Multi30k German-English by default).

    Exit codes: 0 done; 2 a mistake in the command, config or input; 3 the work failed; 130 interrupted.
    """


for module in (recipe, translation, scoring, tools, export, importing, serve):
    module.register(app)


# oneDNN (torch's CPU kernels in bf16) keeps a compiled kernel per matrix shape, 1,024 by default;
# training batches come in hundreds of shapes, and that cache grew `mt train`'s memory by ~1 GB in
# 100 updates at no speed gain over 16 (docs/benchmarks.md, "Corpus size"). A user's
# own setting wins. Set before torch loads: oneDNN reads it once.
ONEDNN_CACHE = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "16")


def main() -> None:
    os.environ.setdefault(*ONEDNN_CACHE)
    _occupy_closed_standard_files()
    exceptions = _click_exceptions()
    try:
        code = app(standalone_mode=False)
    except exceptions.ClickException as err:
        no_args_help = getattr(exceptions, "NoArgsIsHelpError", ())
        if isinstance(err, no_args_help):  # `mt` alone: the help, as before
            err.show()
            sys.exit(err.exit_code)
        sys.exit(_usage_error(err))
    except typer.Abort:
        typer.echo("error: aborted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)


def _click_exceptions():
    """The module of Click's exceptions that this Typer raises (newer ones carry their own Click)."""
    try:
        from typer._click import exceptions
    except ImportError:
        from click import exceptions
    return exceptions


def _usage_error(err) -> int:
    """A mistake in the command line (unknown option, a value of the wrong type) as every other
    mistake is shown: one line ``error: ...`` on stderr, instead of Click's usage box; exit 2."""
    message = " ".join(err.format_message().split())
    context = getattr(err, "ctx", None)
    hint = f" (see `{context.command_path} --help`)" if context is not None else ""
    typer.echo(f"error: {message}{hint}", err=True)
    return EXIT_USAGE


def _occupy_closed_standard_files() -> None:
    """Put /dev/null on standard descriptors the process started without (``mt translate >&-``).

    Python then has no ``sys.stdout`` (None: the commands that need it say so in one line), but
    the descriptor number would be free, and the next file mt opens (a temporary output) would
    get it: anything written to "standard output" by a library or a child would land in that file.
    A closed stderr gets a stream to /dev/null, so messages go nowhere instead of failing.
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - for the process's life
