"""Device and precision choice: what `auto` resolves to, and what is refused."""

from __future__ import annotations

import typing

import pytest
import torch

from mt_cli.config.sections import TrainConfig
from mt_cli.errors import ConfigError, InputError
from mt_cli.runtime import device
from mt_cli.runtime.device import amp_dtype, inference_dtype
from mt_cli.runtime.precision import AMP_MODES, ComputeType, amp_compute_type

CPU = torch.device("cpu")


@pytest.mark.parametrize("native", [True, False])
def test_cpu_auto_uses_bf16_only_where_it_runs_natively(monkeypatch, native: bool) -> None:
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: native)
    assert amp_dtype(CPU, "auto") == (torch.bfloat16 if native else None)
    assert amp_dtype(CPU, "off") is None


def test_explicit_bf16_is_refused_on_a_cpu_that_would_emulate_it(monkeypatch) -> None:
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: False)
    with pytest.raises(ConfigError, match="no native bf16.*use amp auto"):
        amp_dtype(CPU, "bf16")
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: True)
    assert amp_dtype(CPU, "bf16") == torch.bfloat16


def test_fp16_needs_a_gpu() -> None:
    with pytest.raises(ConfigError, match="fp16 needs a CUDA GPU"):
        amp_dtype(CPU, "fp16")


def test_every_train_amp_value_names_one_compute_type() -> None:
    amp = typing.get_type_hints(TrainConfig)["amp"]
    assert set(AMP_MODES) == set(typing.get_args(amp))  # the recipe's values, no more
    assert amp_compute_type("off") is ComputeType.FLOAT32 and amp_compute_type("auto") is ComputeType.DEFAULT
    with pytest.raises(ConfigError, match="choose one of auto, bf16, fp16, off"):
        amp_compute_type("fp8")


@pytest.mark.parametrize("native", [True, False])
def test_training_and_inference_agree_on_each_precision(monkeypatch, native: bool) -> None:
    # One mapping: train.amp's dtype is the dtype of its compute type, or both are refused. The
    # defaults differ on a CPU: translating in fp32 (batch-independent), training auto in bf16
    # where the CPU has it natively, which the trainer then measures against fp32.
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: native)
    assert inference_dtype(CPU, ComputeType.DEFAULT) is None
    for mode, compute_type in AMP_MODES.items():
        if compute_type is ComputeType.DEFAULT:
            assert amp_dtype(CPU, mode) == (torch.bfloat16 if native else None)
            continue
        try:
            expected = inference_dtype(CPU, compute_type)
        except InputError:
            with pytest.raises(ConfigError, match=f"amp {mode} "):
                amp_dtype(CPU, mode)
        else:
            assert amp_dtype(CPU, mode) == expected, mode


@pytest.mark.filterwarnings("ignore:CUDA is not available")  # the flags are global: no GPU needed
def test_cuda_autocast_leaves_cudnn_attention_out_and_restores_it() -> None:
    # cuDNN's SDPA kernel builds a plan per new batch shape (docs/benchmarks.md, "CUDA: cuDNN's
    # attention kernel, left out"); the other kernels stay allowed.
    cuda = torch.backends.cuda
    assert cuda.cudnn_sdp_enabled()
    with device.autocast(torch.device("cuda"), torch.bfloat16):
        assert not cuda.cudnn_sdp_enabled()
        assert cuda.flash_sdp_enabled() and cuda.mem_efficient_sdp_enabled() and cuda.math_sdp_enabled()
    assert cuda.cudnn_sdp_enabled()
    with device.autocast(torch.device("cpu"), torch.bfloat16):
        assert cuda.cudnn_sdp_enabled()  # the CPU's kernels are not these
