"""``--engine`` and ``--compute-type``: open the engine a command decodes with, from a run."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer

from mt_cli.cli.common import log
from mt_cli.decode.engine import Engine, EngineKind
from mt_cli.errors import InputError


class ComputeType(str, enum.Enum):
    """CTranslate2's compute types on a CPU (``default``: the export's own)."""

    DEFAULT = "default"
    FLOAT32 = "float32"
    INT8 = "int8"
    INT8_FLOAT32 = "int8_float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"


EngineOption = Annotated[
    EngineKind,
    typer.Option(
        "--engine",
        "-e",
        help="mt (PyTorch) or ctranslate2 (the run's CTranslate2 export, made on first use; "
        "--run may also name an export directory).",
    ),
]
ComputeTypeOption = Annotated[
    ComputeType,
    typer.Option("--compute-type", help="CTranslate2's precision (only with --engine ctranslate2)."),
]


def open_engine(
    run: Path,
    engine: EngineKind,
    checkpoint: str | None,
    device: str,
    compute_type: ComputeType = ComputeType.DEFAULT,
) -> Engine:
    """The run's model in ``engine``."""
    if engine is EngineKind.MT:
        from mt_cli.decode.translator import Translator

        if compute_type is not ComputeType.DEFAULT:
            raise InputError("--compute-type is CTranslate2's; mt's precision follows the device")
        return Translator.from_run(run, checkpoint, device)
    from mt_cli.decode.ctranslate2 import CTranslate2Engine
    from mt_cli.export.runs import ctranslate2_model_dir

    model_dir = ctranslate2_model_dir(run, checkpoint, log)
    return CTranslate2Engine(model_dir, device, compute_type.value)  # CTranslate2 knows "auto" too
