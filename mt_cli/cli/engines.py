"""``--engine``: open the engine a command decodes with, from a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mt_cli.decode.engine import Engine, EngineKind

EngineOption = Annotated[
    EngineKind,
    typer.Option(
        "--engine",
        "-e",
        help="mt (PyTorch) or ctranslate2 (the run's CTranslate2 export, made on first use).",
    ),
]


def open_engine(run: Path, engine: EngineKind, checkpoint: str | None, device: str) -> Engine:
    """The run's model in ``engine``."""
    from mt_cli.decode.translator import Translator

    if engine is EngineKind.MT:
        return Translator.from_run(run, checkpoint, device)
    raise NotImplementedError(engine)
