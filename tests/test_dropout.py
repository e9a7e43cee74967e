"""The CPU dropout: keep rate, scaling, gradient, seeding, and identity outside training."""

from __future__ import annotations

import pytest
import torch

from mt_cli.dropout import Dropout


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_keeps_one_minus_p_and_scales_the_kept(p: float) -> None:
    torch.manual_seed(0)
    layer = Dropout(p).train()
    x = torch.rand(1000, 1000) + 0.5  # no zeros, so a zero in the output means dropped
    y = layer(x)
    kept = y != 0
    assert kept.float().mean().item() == pytest.approx(1 - p, abs=0.003)
    torch.testing.assert_close(y[kept], x[kept] / (1 - p), rtol=1e-6, atol=0)


def test_gradient_is_the_mask_times_the_scale() -> None:
    torch.manual_seed(1)
    x = (torch.rand(64, 33) + 0.5).requires_grad_()
    y = Dropout(0.3).train()(x)
    y.sum().backward()
    expected = (y != 0).float() / 0.7
    torch.testing.assert_close(x.grad, expected, rtol=1e-6, atol=0)


def test_seeded_masks_repeat_and_bf16_keeps_its_dtype() -> None:
    layer = Dropout(0.3).train()
    x = torch.ones(7, 11, dtype=torch.bfloat16)
    torch.manual_seed(5)
    first = layer(x)
    torch.manual_seed(5)
    assert torch.equal(layer(x), first)
    assert first.dtype == torch.bfloat16
    assert not torch.equal(layer(x), first)  # the generator moved on


def test_identity_in_eval_and_at_zero() -> None:
    x = torch.randn(4, 5)
    assert Dropout(0.3).eval()(x) is x
    assert Dropout(0.0).train()(x) is x
    with pytest.raises(ValueError, match="must be in"):
        Dropout(1.0)
