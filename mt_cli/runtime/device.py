"""Where the model runs and in which precision: one answer for training and translation."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from mt_cli.errors import ConfigError, InputError
from mt_cli.runtime.precision import ComputeType, amp_compute_type


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
    """The autocast dtype for ``train.amp`` (auto | bf16 | fp16 | off; ``precision.AMP_MODES``
    names the compute type of each); None means fp32. A refusal speaks train.amp's words. For
    ``auto`` on a CPU this is bf16 where the CPU has it natively: the trainer then measures which
    of bf16 and fp32 updates its model faster there (``train.amp``)."""
    compute_type = amp_compute_type(mode)
    refusal = _refusal(device, compute_type)
    if refusal is not None:
        advice = (
            "on the CPU use bf16, auto or off"
            if compute_type is ComputeType.FLOAT16
            else "use amp auto or off"
        )
        raise ConfigError(f"amp {mode} {refusal}; {advice}")
    if compute_type is ComputeType.DEFAULT and device.type == "cpu":
        return torch.bfloat16 if cpu_has_native_bf16() else None  # a candidate, measured by the trainer
    return _dtype(device, compute_type)


def inference_dtype(device: torch.device, compute_type: ComputeType) -> torch.dtype | None:
    """The dtype mt decodes in for ``--compute-type`` (None: fp32). ``default`` is fp32 on a CPU:
    there a sentence's bf16 translation depends on the other sentences of its batch (the kernels'
    accumulation order follows the batch's shapes; on an AMX Xeon 43 of 300 beam-5 lines changed
    between two buffer sizes) and agrees less with transformers and CTranslate2, where fp32's does
    not. On a GPU it is bf16 (fp16 on one without bf16); ``--compute-type bfloat16`` asks for bf16
    on a CPU that has it."""
    refusal = _refusal(device, compute_type)
    if refusal is not None:
        advice = {
            ComputeType.FLOAT16: "; on the CPU use float32 or bfloat16",
            ComputeType.BFLOAT16: "; use float16 or float32" if device.type == "cuda" else "; use float32",
        }.get(compute_type, "")
        raise InputError(f"compute type {compute_type.value} {refusal}{advice}")
    return _dtype(device, compute_type)


def _refusal(device: torch.device, compute_type: ComputeType) -> str | None:
    """Why mt cannot compute in ``compute_type`` on ``device`` (None: it can)."""
    if compute_type is ComputeType.BFLOAT16:
        if device.type == "cpu" and not cpu_has_native_bf16():
            # Emulated bf16 matrix products measured ~1 GFLOP/s on an AVX2 CPU (AMD EPYC, torch 2.13)
            # against ~110-170 in fp32: a run would seem to hang, so refuse it up front.
            return (
                "was asked for, but this CPU has no native bf16 (AVX512-BF16), where bf16 matrix "
                "products run ~100x slower than fp32"
            )
        if device.type == "cuda" and not torch.cuda.is_bf16_supported():
            return "was asked for, but this GPU has no bf16"
    if compute_type is ComputeType.FLOAT16 and device.type != "cuda":
        return "needs a CUDA GPU"
    if compute_type in (ComputeType.INT8, ComputeType.INT8_FLOAT32):
        return "is CTranslate2's (--engine ctranslate2); mt computes in float32, bfloat16 or float16"
    return None


def _dtype(device: torch.device, compute_type: ComputeType) -> torch.dtype | None:
    """The dtype of a compute type mt can use on ``device`` (None: fp32)."""
    if compute_type is ComputeType.DEFAULT:
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return None
    return {ComputeType.BFLOAT16: torch.bfloat16, ComputeType.FLOAT16: torch.float16}.get(compute_type)


# SDPA's kernels on CUDA, cuDNN's left out: it builds an execution plan for each new (batch,
# length) shape, ~8 ms of CPU time each on an H200 (torch 2.11), and batches of varying lengths
# are always new. That was 650 ms of a 750 ms update of the WMT recipe. The memory-efficient
# kernel takes the same masks with no plan to build. cuDNN's kernel runs only in bf16 and fp16,
# that is under autocast, so this is where it is left out.
_CUDA_ATTENTION = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


@contextlib.contextmanager
def autocast(device: torch.device, dtype: torch.dtype | None) -> Iterator[None]:
    """Mixed precision in ``dtype`` (None: none), with the attention kernels above on CUDA."""
    if dtype is None:
        yield
        return
    kernels = sdpa_kernel(_CUDA_ATTENTION) if device.type == "cuda" else contextlib.nullcontext()
    with torch.autocast(device.type, dtype=dtype), kernels:
        yield
