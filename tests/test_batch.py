"""data/batch.py: ids with their specials, padded tensors and masks."""

from __future__ import annotations

import pytest
import torch

from mt_cli.data.batch import Batch, collate, pad_sources, source_ids, target_ids
from mt_cli.specials import BOS_ID, EOS_ID, PAD_ID


def test_specials_are_added_on_each_side() -> None:
    assert source_ids([7, 8]) == [7, 8, EOS_ID]
    assert target_ids([7, 8]) == [BOS_ID, 7, 8, EOS_ID]


def test_collate_shift_masks_and_counts() -> None:
    src = [[5, 6, 7, EOS_ID], [8, EOS_ID]]
    tgt = [[BOS_ID, 9, 10, EOS_ID], [BOS_ID, 11, 12, 13, 14, EOS_ID]]
    b = collate(src, tgt)
    assert b.src.tolist() == [[5, 6, 7, EOS_ID], [8, EOS_ID, PAD_ID, PAD_ID]]
    assert b.tgt_in.tolist() == [[BOS_ID, 9, 10, PAD_ID, PAD_ID], [BOS_ID, 11, 12, 13, 14]]
    assert b.tgt_out.tolist() == [[9, 10, EOS_ID, PAD_ID, PAD_ID], [11, 12, 13, 14, EOS_ID]]
    assert b.src.dtype == b.tgt_in.dtype == b.tgt_out.dtype == torch.long
    assert b.src_mask.shape == (2, 1, 1, 4) and b.src_mask.dtype == torch.bool
    assert b.src_mask[:, 0, 0].tolist() == [[True] * 4, [True, True, False, False]]
    assert b.tgt_mask.shape == (2, 1, 5, 5) and b.tgt_mask.dtype == torch.bool
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    assert torch.equal(b.tgt_mask[1, 0], causal)
    assert torch.equal(b.tgt_mask[0, 0], causal & torch.tensor([True, True, True, False, False]))
    assert not b.tgt_mask[0, 0, :, 3:].any()  # padded keys are never attended
    assert b.tgt_mask[:, 0].any(dim=-1).all()  # no fully masked query row (SDPA would give NaN)
    assert (b.src_tokens, b.tgt_tokens, b.n_sentences) == (6, 8, 2)
    assert b.tgt_tokens == int((b.tgt_out != PAD_ID).sum())


def test_pad_sources_is_collates_source_half() -> None:
    src = [[4, EOS_ID], [5, 6, 7, EOS_ID], [EOS_ID]]
    ids, mask = pad_sources(src)
    b = collate(src, [[BOS_ID, EOS_ID]] * 3)
    assert torch.equal(ids, b.src) and torch.equal(mask, b.src_mask)
    assert torch.equal(mask[:, 0, 0], ids != PAD_ID)


def test_collate_rejects_targets_without_specials() -> None:
    with pytest.raises(ValueError):
        collate([[EOS_ID]], [[EOS_ID]])


def test_batch_to_keeps_values() -> None:
    b = collate([[4, EOS_ID]], [[BOS_ID, 5, EOS_ID]])
    moved = b.to("cpu")
    assert isinstance(moved, Batch) and torch.equal(moved.tgt_mask, b.tgt_mask)
    assert (moved.src_tokens, moved.tgt_tokens, moved.n_sentences) == (2, 2, 1)


def test_padded_rounds_widths_up_and_every_mask_leaves_the_padding_out() -> None:
    src = [[5, 6, 7, EOS_ID], [8, EOS_ID]]
    tgt = [[BOS_ID, 9, 10, EOS_ID], [BOS_ID, 11, 12, 13, 14, EOS_ID]]
    b = collate(src, tgt)
    p = b.padded(8)
    assert p.src.shape == (2, 8) and p.tgt_in.shape == p.tgt_out.shape == (2, 8)
    assert p.src_mask.shape == (2, 1, 1, 8) and p.tgt_mask.shape == (2, 1, 8, 8)
    assert torch.equal(p.src[:, :4], b.src) and (p.src[:, 4:] == PAD_ID).all()
    assert torch.equal(p.tgt_out[:, :5], b.tgt_out) and (p.tgt_out[:, 5:] == PAD_ID).all()
    assert torch.equal(p.src_mask[..., :4], b.src_mask) and not p.src_mask[..., 4:].any()
    assert torch.equal(p.tgt_mask[:, :, :5, :5], b.tgt_mask)  # the real part unchanged
    assert not p.tgt_mask[..., 5:].any() and p.tgt_mask[:, 0].any(dim=-1).all()  # no key past the end
    assert (p.src_tokens, p.tgt_tokens) == (b.src_tokens, b.tgt_tokens)
    assert b.padded(1) is b and p.padded(8) is p


def test_padding_changes_no_loss_nor_gradient() -> None:
    """The model's loss and gradients on a padded batch are those on the batch as collated."""
    from mt_cli.config.sections import ModelConfig
    from mt_cli.model.loss import token_loss
    from mt_cli.model.transformer import build_model

    torch.manual_seed(0)
    model = build_model(
        ModelConfig(d_model=32, n_heads=4, d_ff=64, encoder_layers=1, decoder_layers=1, dropout=0.0), 40, 40
    )
    src = [[5, 6, 7, 21, EOS_ID], [8, EOS_ID], [30, 31, EOS_ID]]
    tgt = [[BOS_ID, 9, 10, EOS_ID], [BOS_ID, 11, 12, 13, 14, 15, EOS_ID], [BOS_ID, 16, EOS_ID]]
    results = []
    for b in (collate(src, tgt), collate(src, tgt).padded(16)):
        model.zero_grad()
        loss = token_loss(model(b.src, b.tgt_in, b.src_mask, b.tgt_mask), b.tgt_out, 0.1)
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (loss, grads), (padded_loss, padded_grads) = results
    torch.testing.assert_close(padded_loss, loss, rtol=1e-6, atol=1e-6)
    for grad, padded_grad in zip(grads, padded_grads):
        torch.testing.assert_close(padded_grad, grad, rtol=1e-5, atol=1e-6)
