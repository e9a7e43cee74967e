"""model/loss.py: the summed token loss that training, validation and bench share."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mt_cli.data.batch import collate
from mt_cli.model.loss import symmetric_kl, token_loss
from mt_cli.specials import PAD_ID


def test_padding_and_smoothing_do_not_count_as_tokens() -> None:
    batch = collate([[5, 6, 3], [7, 3]], [[2, 8, 9, 10, 3], [2, 11, 3]])
    assert batch.tgt_tokens == 4 + 2  # tgt_out real tokens only
    logits = torch.randn(2, batch.tgt_out.size(1), 20)
    summed = token_loss(logits, batch.tgt_out, 0.0)
    by_hand = sum(
        -logits[b, t].log_softmax(-1)[batch.tgt_out[b, t]]
        for b in range(2)
        for t in range(batch.tgt_out.size(1))
        if batch.tgt_out[b, t] != 0
    )
    torch.testing.assert_close(summed, by_hand)
    smoothed = token_loss(logits, batch.tgt_out, 0.1)
    assert smoothed > 0 and not torch.isclose(smoothed, summed)
    assert token_loss(logits, batch.tgt_out) == summed  # no smoothing unless asked: validation's NLL


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_training_loss_and_gradient_equal_cross_entropys(dtype: torch.dtype, smoothing: float) -> None:
    torch.manual_seed(3)
    target = torch.randint(PAD_ID + 1, 50, (6, 9))
    target[0, 5:] = PAD_ID
    target[4, 2:] = PAD_ID
    start = (torch.randn(6, 9, 50) * 4).to(dtype)
    ours = start.clone().requires_grad_()
    theirs = start.clone().requires_grad_()
    loss = token_loss(ours, target, smoothing)
    flat = theirs.reshape(-1, 50).float()
    reference = F.cross_entropy(
        flat, target.reshape(-1), ignore_index=PAD_ID, label_smoothing=smoothing, reduction="sum"
    )
    (loss * 0.37).backward()
    (reference * 0.37).backward()
    torch.testing.assert_close(loss, reference, rtol=1e-5, atol=1e-4)
    assert ours.grad.dtype == dtype
    assert torch.all(ours.grad[0, 5:] == 0) and torch.all(ours.grad[4, 2:] == 0)
    tolerance = {torch.float32: 1e-6, torch.bfloat16: 8e-3, torch.float16: 1e-3}[dtype]
    torch.testing.assert_close(ours.grad.float(), theirs.grad.float(), rtol=0, atol=tolerance)
    with torch.no_grad():
        torch.testing.assert_close(token_loss(ours, target, smoothing), reference, rtol=1e-5, atol=1e-4)


def test_symmetric_kl_is_both_divergences_halved_over_real_positions() -> None:
    generator = torch.Generator().manual_seed(3)
    first, second = torch.randn(2, 3, 5, 7, generator=generator)  # (B, T, V) each
    target = torch.tensor(
        [[4, 5, PAD_ID, PAD_ID, PAD_ID], [4, 5, 6, 3, PAD_ID], [3, PAD_ID, PAD_ID, PAD_ID, PAD_ID]]
    )
    log_first, log_second = first.log_softmax(-1), second.log_softmax(-1)
    real = target != PAD_ID
    expected = 0.5 * (
        F.kl_div(log_second[real], log_first[real], log_target=True, reduction="sum")
        + F.kl_div(log_first[real], log_second[real], log_target=True, reduction="sum")
    )
    assert torch.allclose(symmetric_kl(first, second, target), expected, atol=1e-5)
    assert symmetric_kl(first, first, target).item() == pytest.approx(0.0, abs=1e-6)


def test_weights_scale_each_positions_loss_and_gradient() -> None:
    torch.manual_seed(4)
    target = torch.randint(PAD_ID + 1, 30, (3, 5))
    target[2, 3:] = PAD_ID
    weights = torch.ones(3, 5)
    weights[0, 1], weights[1, 0:2] = 4.0, 2.0
    ours = torch.randn(3, 5, 30, requires_grad=True)
    theirs = ours.detach().clone().requires_grad_()
    loss = token_loss(ours, target, 0.1, weights)
    each = F.cross_entropy(
        theirs.reshape(-1, 30), target.reshape(-1), ignore_index=PAD_ID, label_smoothing=0.1, reduction="none"
    )
    reference = (each * weights.reshape(-1)).sum()
    loss.backward()
    reference.backward()
    torch.testing.assert_close(loss, reference)
    torch.testing.assert_close(ours.grad, theirs.grad)
    with torch.no_grad(), pytest.raises(ValueError, match="the training loss"):
        token_loss(ours, target, 0.0, weights)
