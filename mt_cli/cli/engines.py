"""The model a command decodes with: one ``ModelChoice`` of the options that open it (``--run``,
``--checkpoint``, ``--device``, ``--engine``, ``--compute-type``, ``--ensemble``,
``--ensemble-weights``), declared once and opened through the Python API (``mt_cli.api.load``).

A command takes a parameter ``choice: ModelChoice = DEFAULT_MODEL`` and is decorated with
``@opens_model``: Typer then reads the seven options in that parameter's place, and the command
gets them as one ``ModelChoice``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints

from mt_cli.cli.common import DEFAULT_RUN, CheckpointOption, DeviceOption, RunOption, log, option, warn
from mt_cli.decode.engine import EngineKind
from mt_cli.errors import InputError
from mt_cli.runtime.precision import ComputeType

if TYPE_CHECKING:
    from mt_cli.api import Model

__all__ = ["DEFAULT_MODEL", "ComputeType", "ModelChoice", "opens_model"]

F = TypeVar("F", bound=Callable[..., Any])

EngineOption = option(
    EngineKind,
    "--engine",
    "-e",
    help="mt (PyTorch) or ctranslate2 (the run's CTranslate2 export, made on first use; "
    "--run may also name an export directory).",
)
ComputeTypeOption = option(
    ComputeType,
    "--compute-type",
    help="Precision: float32, bfloat16 or float16 (CUDA) for mt, also int8 and int8_float32 for "
    "ctranslate2 (default: bf16 where the hardware has it, else float32; CTranslate2: the export's).",
)
EnsembleOption = option(
    list[str] | None,
    "--ensemble",
    help="Another model to combine with --run, RUN or RUN:CHECKPOINT (repeatable; mt engine): "
    "the mean of their log-probabilities each step. Tokenizers must be the same files.",
)
EnsembleWeightsOption = option(
    str | None,
    "--ensemble-weights",
    help="Comma-separated weights, one per model, --run first (default: equal), e.g. 2,1,1.",
)


@dataclass(frozen=True)
class ModelChoice:
    """Which model a command decodes with: each field is a command-line option, in the order
    ``--help`` lists them, with its default."""

    run: RunOption = DEFAULT_RUN
    checkpoint: CheckpointOption = None
    device: DeviceOption = "auto"
    engine: EngineOption = EngineKind.MT
    compute_type: ComputeTypeOption = ComputeType.DEFAULT
    ensemble: EnsembleOption = None
    ensemble_weights: EnsembleWeightsOption = None

    def open(self, processes: int | None = None) -> Model:
        """The run's model (or ensemble) in its engine, as the API opens it; warnings and the
        export's progress go to stderr."""
        from mt_cli.api import load

        if self.ensemble_weights is not None and not self.ensemble:
            raise InputError("--ensemble-weights needs --ensemble: one weight per model")
        weights = parse_weights(self.ensemble_weights)
        return load(
            self.run,
            self.checkpoint,
            self.engine,
            self.device,
            self.compute_type,
            self.ensemble or (),
            weights,
            warn=warn,
            log=log,
            processes=processes,
        )


DEFAULT_MODEL = ModelChoice()


def parse_weights(text: str | None) -> list[float] | None:
    """``--ensemble-weights 2,1,1`` -> [2.0, 1.0, 1.0]; the ensemble checks how many and their signs."""
    if text is None:
        return None
    try:
        return [float(part) for part in text.split(",")]
    except ValueError:
        raise InputError(f"--ensemble-weights {text!r} is not a comma-separated list of numbers") from None


def opens_model(command: F) -> F:
    """``command`` with its ``ModelChoice`` parameter spelled as that class's options, in its place:
    Typer reads those options from the signature, and the command is called with one
    ``ModelChoice`` made of them."""
    signature = inspect.signature(command, eval_str=True)
    place = next(p for p in signature.parameters.values() if p.annotation is ModelChoice)
    hints = get_type_hints(ModelChoice, include_extras=True)
    options = [
        place.replace(name=field.name, annotation=hints[field.name], default=field.default)
        for field in dataclasses.fields(ModelChoice)
    ]
    parameters = [p for old in signature.parameters.values() for p in (options if old is place else [old])]

    @functools.wraps(command)
    def with_model(**arguments: Any) -> Any:
        choice = ModelChoice(**{param.name: arguments.pop(param.name) for param in options})
        return command(**arguments, **{place.name: choice})

    with_model.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    with_model.__annotations__ = {p.name: p.annotation for p in parameters}
    with_model.__annotations__["return"] = signature.return_annotation
    return with_model  # type: ignore[return-value]
