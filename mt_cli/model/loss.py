"""The token loss: the one cross-entropy that training, validation and ``mt bench`` all use.

Training computes it with ``_SmoothedCrossEntropy``, which works out the gradient of the logits in
the forward pass, from the log-probabilities it has at hand, and keeps only that gradient, in the
logits' dtype (fp32 for fp16): its backward is one product. ``F.cross_entropy`` on bf16 logits
keeps fp32 log-probabilities and builds the gradient from zeros, a scatter and an add in the
backward; on the CPU that took 2.6x as long for a (2048, 4000) batch (benchmarks.md, "The training
update"). The loss and gradient are the same; validation, without gradients, keeps
``F.cross_entropy``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mt_cli.specials import PAD_ID


def token_loss(
    logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.0, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """Summed cross-entropy over real target tokens; padding positions count for nothing.

    Summed, not averaged: the caller divides by the real target tokens of the whole update
    (training, across accumulation and ranks) or of the whole split (validation). ``weights``
    (B, T), in training only, scale each position's term (``train.term_loss_weight``).
    """
    flat_logits = logits.reshape(-1, logits.size(-1))  # (B*T, V)
    flat_target = target.reshape(-1)  # (B*T,)
    if torch.is_grad_enabled() and logits.requires_grad:
        flat_weights = None if weights is None else weights.reshape(-1)  # (B*T,)
        return _SmoothedCrossEntropy.apply(flat_logits, flat_target, smoothing, flat_weights)
    if weights is not None:
        raise ValueError("token weights belong to the training loss: validation weighs every token alike")
    return F.cross_entropy(
        flat_logits.float(),  # fp32 whatever the compute dtype
        flat_target,
        ignore_index=PAD_ID,
        label_smoothing=smoothing,
        reduction="sum",
    )


def symmetric_kl(first: torch.Tensor, second: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """R-Drop's regulariser (Liang et al. 2021): (KL(p1 || p2) + KL(p2 || p1)) / 2 of two passes'
    logits (B, T, V), summed over the real positions of ``target`` (B, T), in fp32.

    The two divergences' sum is sum((p1 - p2)(log p1 - log p2)): one expression, both directions.
    """
    log_first = first.float().log_softmax(-1)  # (B, T, V)
    log_second = second.float().log_softmax(-1)  # (B, T, V)
    both = (log_first.exp() - log_second.exp()) * (log_first - log_second)  # (B, T, V)
    return 0.5 * both.sum(-1).masked_fill(target == PAD_ID, 0.0).sum()


class _SmoothedCrossEntropy(torch.autograd.Function):
    """``F.cross_entropy(logits.float(), target, ignore_index=PAD_ID, label_smoothing=smoothing,
    reduction="sum")`` with the gradient computed in the forward pass.

    Per real row: loss = -(1 - s) log p[target] - s mean(log p), whose gradient in the logits is
    p - (1 - s) onehot(target) - s / V; padding rows have none. With ``weights`` (N,) each row's
    loss and gradient are multiplied by its weight.
    """

    @staticmethod
    def forward(
        ctx, logits: torch.Tensor, target: torch.Tensor, smoothing: float, weights: torch.Tensor | None
    ) -> torch.Tensor:
        log_probs = torch.log_softmax(logits, -1, dtype=torch.float32)  # (N, V)
        column = target.unsqueeze(1)  # (N, 1)
        padding = target == PAD_ID  # (N,)
        likelihood = (1 - smoothing) * log_probs.gather(1, column).squeeze(1) + smoothing * log_probs.mean(-1)
        if weights is not None:
            likelihood = likelihood * weights
        loss = -likelihood.masked_fill(padding, 0.0).sum()
        grad = log_probs.exp_()  # (N, V): the probabilities, in place of the log-probabilities
        if smoothing:
            grad.sub_(smoothing / logits.size(-1))
        grad.scatter_add_(1, column, torch.full_like(column, smoothing - 1.0, dtype=grad.dtype))
        if grad.is_cuda:
            grad.masked_fill_(padding.unsqueeze(1), 0.0)  # nonzero() would wait for the device
        else:
            grad.index_fill_(0, padding.nonzero().squeeze(1), 0.0)  # a pass over the padding rows only
        if weights is not None:
            grad.mul_(weights.unsqueeze(1))
        # fp16's range would lose the smallest probabilities before the loss scale multiplies them.
        keep_dtype = torch.float32 if logits.dtype == torch.float16 else logits.dtype
        ctx.save_for_backward(grad.to(keep_dtype))
        ctx.logits_dtype = logits.dtype
        return loss

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        (grad,) = ctx.saved_tensors
        return (grad * grad_loss).to(ctx.logits_dtype), None, None, None
