"""Device and precision choice: what `auto` resolves to, and what is refused."""

from __future__ import annotations

import pytest
import torch

from mt_cli.errors import ConfigError
from mt_cli.runtime import device
from mt_cli.runtime.device import amp_dtype

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
