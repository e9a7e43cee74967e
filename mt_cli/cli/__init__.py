"""The ``mt`` command line: argument parsing and calls, nothing else.

One module per group of commands: ``recipe`` (prepare, train, config), ``translation``
(translate, eval), ``scoring`` (score) and ``tools`` (average, bench, plot). Heavy modules (torch, datasets,
matplotlib) are imported inside the commands that need them, so ``mt --help`` starts fast.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from mt_cli.cli import export, recipe, scoring, serve, tools, translation
from mt_cli.cli.common import app
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


for module in (recipe, translation, scoring, tools, export, serve):
    module.register(app)


# oneDNN (torch's CPU kernels in bf16) keeps a compiled kernel per matrix shape, 1,024 by default;
# training batches come in hundreds of shapes, and that cache grew `mt train`'s memory by ~1 GB in
# 100 updates at no speed gain over 16 (docs/benchmarks.md, "Corpus size"). A user's
# own setting wins. Set before torch loads: oneDNN reads it once.
ONEDNN_CACHE = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "16")


def main() -> None:
    os.environ.setdefault(*ONEDNN_CACHE)
    app()
