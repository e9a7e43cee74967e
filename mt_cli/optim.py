"""The optimizer and the learning-rate schedule (a pure function of the update number)."""

from __future__ import annotations

import math

import torch
from torch import nn

from mt_cli.config import TrainConfig


def learning_rate(step: int, cfg: TrainConfig, d_model: int) -> float:
    """Learning rate for update ``step`` (1-based), all schedules with linear warmup.

    inverse_sqrt: peaks at ``lr`` after ``warmup_steps``, then decays as 1/sqrt(step).
    noam: Vaswani et al. 2017, ``lr`` as the scale factor times d_model^-0.5.
    constant: ``lr`` after warmup.
    cosine / linear: from ``lr`` after warmup down to 0 at ``max_steps`` (annealing to zero
    is what makes a short, fixed-length run end at a good point rather than a noisy one).
    """
    step = max(step, 1)
    warmup = cfg.warmup_steps
    if cfg.schedule in ("constant", "cosine", "linear") and step < warmup:
        return cfg.lr * step / warmup
    if cfg.schedule == "constant":
        return cfg.lr
    if cfg.schedule in ("cosine", "linear"):
        progress = min(1.0, (step - warmup) / max(1, cfg.max_steps - warmup))
        if cfg.schedule == "linear":
            return cfg.lr * (1.0 - progress)
        return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * progress))
    if cfg.schedule == "noam":
        return cfg.lr * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
    return cfg.lr * min(step / warmup, math.sqrt(warmup / step))


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW; weight decay applies to weight matrices only, never to norms, biases or embeddings.

    Decaying embeddings would shrink rare words' vectors (and, tied, the output layer) towards
    zero; norms and biases are offsets and scales, not capacity.
    """
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        is_matrix = param.dim() >= 2 and "embed" not in name
        (decay if is_matrix else no_decay).append(param)
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.optimizer_betas, eps=cfg.optimizer_eps)
