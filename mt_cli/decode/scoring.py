"""Forced decoding: the model's log-probability of given translations (``mt score``).

The numbers are those of training's validation loss with label smoothing 0: one teacher-forced
pass, log_softmax in fp32, the target as training tokenizes it (pieces, then EOS). The mean
negative per-token log-probability of a corpus is therefore its validation cross-entropy.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from mt_cli.data.batch import collate, target_ids
from mt_cli.decode.hypotheses import Decoder
from mt_cli.specials import EOS_ID


@torch.inference_mode()
def force_decode(
    model: Decoder, src: Tensor, src_mask: Tensor, targets: Sequence[Sequence[int]]
) -> list[list[float]]:
    """Per sentence, the log-probability of each target piece and then of EOS (len + 1 numbers).

    ``src`` (B, S) and ``src_mask`` (B, 1, 1, S) as for the searches; ``targets`` are piece ids
    without BOS/EOS, at most ``max_positions - 1`` with the EOS. Padding is masked, so a
    sentence's scores do not depend on its batch beyond the last bits of the arithmetic.
    """
    if len(targets) != src.size(0):
        raise ValueError(f"{src.size(0)} sources but {len(targets)} targets")
    # collate is the one place target masks are made; the sources are already padded (src), so
    # it gets placeholder ones and only its target side is used.
    batch = collate([[EOS_ID]] * len(targets), [target_ids(list(t)) for t in targets])
    tgt_in, tgt_out = batch.tgt_in.to(src.device), batch.tgt_out.to(src.device)  # (B, T) each
    tgt_mask = batch.tgt_mask.to(src.device)  # (B, 1, T, T)
    scores = model.decode(tgt_in, model.encode(src, src_mask), src_mask, tgt_mask).float()  # (B, T, V)
    # gather - logsumexp is log_softmax's value at the target, without a second (B, T, V) tensor.
    log_probs = scores.gather(-1, tgt_out.unsqueeze(-1))[..., 0] - scores.logsumexp(-1)  # (B, T)
    rows = log_probs.cpu().tolist()
    return [row[: len(t) + 1] for row, t in zip(rows, targets)]
