"""How an export stores its weights; its own module so that the CLI can name the choices without
importing torch."""

import enum


class Quantization(str, enum.Enum):
    """``--quantization``: how CTranslate2 stores the weights (and so computes by default)."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    INT8 = "int8"
    INT8_FLOAT32 = "int8_float32"
