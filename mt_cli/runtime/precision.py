"""``--compute-type``: the names of the precisions an engine computes in (no torch here, so that
the command line can name them without loading it; ``device.inference_dtype`` maps them for mt)."""

from __future__ import annotations

import enum


class ComputeType(str, enum.Enum):
    """mt takes float32, bfloat16 and float16 (CUDA only); CTranslate2 takes all of these.
    ``default``: mt's choice for the device (bf16 where the hardware has it, else fp32),
    CTranslate2's the export's own (float32)."""

    DEFAULT = "default"
    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"
    INT8 = "int8"
    INT8_FLOAT32 = "int8_float32"
