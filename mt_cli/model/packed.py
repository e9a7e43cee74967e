"""Linear layers that can run on a copy of their weight packed once for oneDNN, for inference on
the CPU (``pack_for_cpu_inference``).

PyTorch's CPU ``nn.Linear`` calls MKL's sgemm in fp32, which on AMD CPUs runs its AVX2 code
(~105 GFLOP/s on one Zen 5 core, torch 2.13) where oneDNN's kernel on a weight reordered once into
its blocked layout reaches ~250 with AVX-512, and ~1.2x MKL on shapes of decoding steps with AVX2
only; in bf16, where torch already calls oneDNN, the packed weight saves the reorder of every call
(the 4,000-piece output projection of 500 beams: 3.2 -> 2.0 ms). ``scripts/linear-rates.py``
measures both. Decoding calls a handful of small products per step, so this is most of its time.

The packed copy is a cache of ``weight``, never the truth: it is used only while the weight is
the same tensor, unchanged since packing (its storage and version counter say so) and of the
input's dtype; otherwise, and for any copy of the layer (``copy.deepcopy``, pickling), the layer is
a plain ``nn.Linear`` again. It is not a parameter or buffer, so state dicts and checkpoints do not
see it, and a model that goes on training after packing falls back to the weight by itself.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class Linear(nn.Linear):
    """``nn.Linear`` (same parameters, same state dict) with an optional oneDNN-packed weight."""

    # (packed weight, the weight's data pointer and version counter when packed); None: unpacked.
    _onednn: tuple[Tensor, int, int] | None = None

    def forward(self, x: Tensor) -> Tensor:
        if self._onednn is not None:
            packed, pointer, version = self._onednn
            weight = self.weight
            if (
                weight.data_ptr() == pointer
                and weight._version == version
                and x.dtype == packed.dtype == weight.dtype
                and x.device.type == "cpu"
                and _autocast_keeps(x.dtype)
            ):
                return torch.ops.mkldnn._linear_pointwise(x, packed, self.bias, "none", [], "")  # (..., out)
        return F.linear(x, self.weight, self.bias)

    def pack(self) -> None:
        """Pack the weight as it is now for oneDNN (``pack_for_cpu_inference`` says when)."""
        weight = self.weight.detach()
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)
        self._onednn = (packed, weight.data_ptr(), self.weight._version)

    def unpack(self) -> None:
        self._onednn = None

    @property
    def is_packed(self) -> bool:
        return self._onednn is not None

    def __getstate__(self) -> dict[str, Any]:
        # An opaque oneDNN tensor cannot be copied or pickled; a copy packs again if it wants to.
        state = self.__dict__.copy()
        state.pop("_onednn", None)
        return state


def _autocast_keeps(dtype: torch.dtype) -> bool:
    """Whether F.linear would compute in ``dtype`` here: autocast is off, or casts to ``dtype``
    (it casts for F.linear, not for the packed op; mt decodes bf16 weights under bf16 autocast)."""
    return not torch.is_autocast_enabled("cpu") or torch.get_autocast_dtype("cpu") == dtype


def can_pack(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether ``pack_for_cpu_inference`` packs for a model on ``device`` computing in ``dtype``."""
    return (
        device.type == "cpu"
        and dtype in (torch.float32, torch.bfloat16)
        and torch.backends.mkldnn.is_available()
    )


def pack_for_cpu_inference(model: nn.Module, dtype: torch.dtype) -> int:
    """Pack every ``Linear`` of ``model`` (already on the CPU, in eval mode, its weights in
    ``dtype``) for oneDNN; returns how many were packed (0 where ``can_pack`` says no)."""
    if not can_pack(torch.device("cpu"), dtype):
        return 0
    linears = [m for m in model.modules() if isinstance(m, Linear) and m.weight.device.type == "cpu"]
    with torch.no_grad():
        for linear in linears:
            linear.pack()
    return len(linears)
