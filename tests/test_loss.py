"""model/loss.py: the summed token loss that training, validation and bench share."""

from __future__ import annotations

import torch

from mt_cli.data.batch import collate
from mt_cli.model.loss import token_loss


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
