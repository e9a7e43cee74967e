"""``--engine``, ``--compute-type`` and ``--ensemble``: open the model a command decodes with,
through the Python API (``mt_cli.api.load``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mt_cli.cli.common import log, warn
from mt_cli.decode.engine import EngineKind
from mt_cli.errors import InputError
from mt_cli.runtime.precision import ComputeType

if TYPE_CHECKING:
    from mt_cli.api import Model

__all__ = ["ComputeType", "open_model"]

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
    typer.Option(
        "--compute-type",
        help="Precision: float32, bfloat16 or float16 (CUDA) for mt, also int8 and int8_float32 for "
        "ctranslate2 (default: bf16 where the hardware has it, else float32; CTranslate2: the export's).",
    ),
]
EnsembleOption = Annotated[
    list[str] | None,
    typer.Option(
        "--ensemble",
        help="Another model to combine with --run, RUN or RUN:CHECKPOINT (repeatable; mt engine): "
        "the mean of their log-probabilities each step. Tokenizers must be the same files.",
    ),
]
EnsembleWeightsOption = Annotated[
    str | None,
    typer.Option(
        "--ensemble-weights",
        help="Comma-separated weights, one per model, --run first (default: equal), e.g. 2,1,1.",
    ),
]


def parse_weights(text: str | None) -> list[float] | None:
    """``--ensemble-weights 2,1,1`` -> [2.0, 1.0, 1.0]; the ensemble checks how many and their signs."""
    if text is None:
        return None
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise InputError(f"--ensemble-weights {text!r} is not a comma-separated list of numbers") from None


def open_model(
    run: Path,
    engine: EngineKind,
    checkpoint: str | None,
    device: str,
    compute_type: ComputeType = ComputeType.DEFAULT,
    ensemble: list[str] | None = None,
    ensemble_weights: str | None = None,
    processes: int | None = None,
) -> Model:
    """The run's model (or ensemble) in ``engine``, as the API opens it; warnings and the export's
    progress go to stderr."""
    from mt_cli.api import load

    if ensemble_weights is not None and not ensemble:
        raise InputError("--ensemble-weights needs --ensemble: one weight per model")
    weights = parse_weights(ensemble_weights)
    return load(
        run,
        checkpoint,
        engine,
        device,
        compute_type,
        ensemble or (),
        weights,
        warn=warn,
        log=log,
        processes=processes,
    )
