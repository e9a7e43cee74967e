"""The token loss: the one cross-entropy that training, validation and ``mt bench`` all use."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mt_cli.specials import PAD_ID


def token_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy over real target tokens; padding positions count for nothing.

    Summed, not averaged: the caller divides by the real target tokens of the whole update
    (training, across accumulation and ranks) or of the whole split (validation).
    """
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),  # (B*T, V), fp32 whatever the compute dtype
        target.reshape(-1),  # (B*T,)
        ignore_index=PAD_ID,
        label_smoothing=smoothing,
        reduction="sum",
    )
