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
