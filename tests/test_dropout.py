"""The CPU dropout and word (token) dropout: rates, scaling, gradient, seeding, what is never dropped."""

from __future__ import annotations

import pytest
import torch

from mt_cli.model.dropout import Dropout, TokenDropout, within_spans


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


def test_bf16_scales_by_the_bf16_rounded_factor() -> None:
    torch.manual_seed(2)
    x = (torch.rand(300, 40) + 0.5).to(torch.bfloat16)
    y = Dropout(0.1).train()(x)
    kept = y != 0
    assert kept.float().mean().item() == pytest.approx(0.9, abs=0.01)
    assert torch.equal(y[kept], x[kept] * torch.tensor(1 / 0.9, dtype=torch.bfloat16))


def test_identity_in_eval_and_at_zero() -> None:
    x = torch.randn(4, 5)
    assert Dropout(0.3).eval()(x) is x
    assert Dropout(0.0).train()(x) is x
    with pytest.raises(ValueError, match="must be in"):
        Dropout(1.0)


def test_token_dropout_replaces_words_at_rate_p_and_never_specials() -> None:
    torch.manual_seed(0)
    layer = TokenDropout(0.2, unk_id=1, first_word_id=4).train()
    tokens = torch.randint(4, 100, (400, 50))
    tokens[:, 0] = 2  # bos
    tokens[:, -1] = 3  # eos
    tokens[:10, 30:] = 0  # padding
    out = layer(tokens)
    words = tokens >= 4
    replaced = out != tokens
    assert torch.equal(out[replaced], torch.ones_like(out[replaced]))  # replaced words become <unk>
    assert not replaced[~words].any()  # pad, bos and eos stay
    assert replaced[words].float().mean().item() == pytest.approx(0.2, abs=0.01)


def test_token_dropout_is_seeded_and_identity_in_eval() -> None:
    layer = TokenDropout(0.3, unk_id=1, first_word_id=4).train()
    tokens = torch.randint(4, 100, (8, 20))
    torch.manual_seed(3)
    first = layer(tokens)
    torch.manual_seed(3)
    assert torch.equal(layer(tokens), first)
    assert layer.eval()(tokens) is tokens
    assert TokenDropout(0.0, 1, 4).train()(tokens) is tokens
    with pytest.raises(ValueError, match="summing under 1"):
        TokenDropout(1.0, 1, 4)
    with pytest.raises(ValueError, match="summing under 1"):
        TokenDropout(0.5, 1, 4, replace=0.5, vocab_size=100)


def test_token_replacement_puts_random_words_beside_unk_and_never_touches_specials() -> None:
    torch.manual_seed(0)
    tokens = torch.randint(4, 100, (400, 50))
    tokens[:, 0], tokens[:, -1] = 2, 3  # bos, eos
    tokens[:10, 30:] = 0  # padding
    words = tokens >= 4
    torch.manual_seed(1)
    out = TokenDropout(0.1, unk_id=1, first_word_id=4, replace=0.2, vocab_size=100).train()(tokens)
    changed = out != tokens
    assert not changed[~words].any()
    unk = out == 1
    assert unk[words].float().mean().item() == pytest.approx(0.1, abs=0.01)
    swapped = changed & ~unk
    assert (out[swapped] >= 4).all() and (out[swapped] < 100).all()
    # a random id equals the one it replaces 1 time in 96: 0.2 * 95/96 of the words change
    assert swapped[words].float().mean().item() == pytest.approx(0.2 * 95 / 96, abs=0.01)
    torch.manual_seed(1)
    without = TokenDropout(0.1, unk_id=1, first_word_id=4).train()(tokens)
    assert torch.equal(without == 1, unk)  # the same draws as word dropout alone


def test_spans_run_from_each_open_to_its_close_and_an_unclosed_one_to_the_end() -> None:
    tokens = torch.tensor([[5, 7, 6, 8, 9, 6, 5], [7, 5, 8, 7, 6, 6, 0]])  # 7 opens, 8 closes
    expected = [[0, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1]]
    assert within_spans(tokens, 7, 8).tolist() == [[bool(x) for x in row] for row in expected]


def test_token_dropout_keeps_spared_spans_whole_and_drops_the_rest_at_rate_p() -> None:
    torch.manual_seed(0)
    tokens = torch.randint(10, 100, (400, 50))
    tokens[:, 10], tokens[:, 16] = 5, 6  # an annotation: positions 10 to 16
    tokens[:, 30] = 5  # one left open: 30 to the end
    layer = TokenDropout(0.3, unk_id=1, first_word_id=4).train()
    layer.spare(5, 6)
    replaced = layer(tokens) != tokens
    assert not replaced[:, 10:17].any() and not replaced[:, 30:].any()
    outside = torch.cat([replaced[:, :10], replaced[:, 17:30]], dim=1)
    assert outside.float().mean().item() == pytest.approx(0.3, abs=0.01)
