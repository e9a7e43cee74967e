"""Where the model runs and in which precision: one answer for training and translation."""

from __future__ import annotations

import contextlib

import torch

from mt_cli.errors import ConfigError, InputError
from mt_cli.runtime.precision import ComputeType


def resolve_device(name: str) -> torch.device:
    """``auto`` picks CUDA when present, else the CPU; ``cuda`` without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device cuda was asked for, but no CUDA GPU is available; use cpu or auto")
    if name not in ("cpu", "cuda"):
        raise ConfigError(f"device {name!r} is not valid; choose one of auto, cpu, cuda")
    return torch.device(name)


def cpu_has_native_bf16() -> bool:
    # A private helper, but the only cheap way to know whether bf16 matmuls run in hardware;
    # emulated bf16 on older CPUs is slower than fp32.
    probe = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    return bool(probe and probe())


def amp_dtype(device: torch.device, mode: str) -> torch.dtype | None:
    """The autocast dtype for ``train.amp`` (auto | bf16 | fp16 | off); None means fp32."""
    if mode == "off":
        return None
    if device.type == "cuda":
        if mode == "fp16" or (mode == "auto" and not torch.cuda.is_bf16_supported()):
            return torch.float16
        return torch.bfloat16
    if mode == "fp16":
        raise ConfigError("amp fp16 needs a CUDA GPU; on the CPU use bf16, auto or off")
    native = cpu_has_native_bf16()
    if mode == "bf16" and not native:
        # Emulated bf16 matrix products measured ~1 GFLOP/s on an AVX2 CPU (AMD EPYC, torch 2.13)
        # against ~110-170 in fp32: a run would seem to hang, so refuse it up front.
        raise ConfigError(
            "amp bf16 was asked for, but this CPU has no native bf16 (AVX512-BF16), where bf16 matrix "
            "products run ~100x slower than fp32; use amp auto (fp32 here) or off"
        )
    return torch.bfloat16 if native else None  # mode is bf16 (native) or auto


def inference_dtype(device: torch.device, compute_type: ComputeType) -> torch.dtype | None:
    """The dtype mt decodes in for ``--compute-type`` (None: fp32). ``default`` is what ``mt
    translate`` always did: bf16 where the hardware has it, else fp32."""
    if compute_type is ComputeType.DEFAULT:
        return amp_dtype(device, "auto")
    if compute_type is ComputeType.FLOAT32:
        return None
    if compute_type is ComputeType.BFLOAT16:
        if device.type == "cpu" and not cpu_has_native_bf16():
            # Emulated bf16 runs ~100x slower than fp32 (see amp_dtype): refuse up front.
            raise InputError("compute type bfloat16: this CPU has no native bf16 (AVX512-BF16); use float32")
        if device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise InputError("compute type bfloat16: this GPU has no bf16; use float16 or float32")
        return torch.bfloat16
    if compute_type is ComputeType.FLOAT16:
        if device.type != "cuda":
            raise InputError("compute type float16 needs a CUDA GPU; on the CPU use float32 or bfloat16")
        return torch.float16
    raise InputError(
        f"compute type {compute_type.value} is CTranslate2's (--engine ctranslate2); "
        "mt computes in float32, bfloat16 or float16"
    )


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)
