"""``--compute-type``: the names of the precisions an engine computes in (no torch here, so that
the command line can name them without loading it; ``device.inference_dtype`` maps them for mt),
and the one mapping from a recipe's ``train.amp`` to them."""

from __future__ import annotations

import enum

from mt_cli.errors import ConfigError


class ComputeType(str, enum.Enum):
    """mt takes float32, bfloat16 and float16 (CUDA only); CTranslate2 takes all of these.
    ``default``: mt's choice for the device (translating: fp32 on a CPU, bf16 or fp16 on a GPU;
    training: ``train.amp: auto``), CTranslate2's the export's own (float32)."""

    DEFAULT = "default"
    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"
    INT8 = "int8"
    INT8_FLOAT32 = "int8_float32"


# ``train.amp``'s words for the precisions mt trains in (the schema checks a recipe's value is one).
AMP_MODES: dict[str, ComputeType] = {
    "auto": ComputeType.DEFAULT,
    "bf16": ComputeType.BFLOAT16,
    "fp16": ComputeType.FLOAT16,
    "off": ComputeType.FLOAT32,
}


def amp_compute_type(mode: str) -> ComputeType:
    """The compute type ``train.amp`` = ``mode`` trains in."""
    try:
        return AMP_MODES[mode]
    except KeyError:
        raise ConfigError(f"train.amp {mode!r} is not valid; choose one of {', '.join(AMP_MODES)}") from None
