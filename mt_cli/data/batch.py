"""Examples and batches: ids with their specials, padded into tensors with their masks.

``src = pieces + [EOS]`` and ``tgt = [BOS] + pieces + [EOS]``; ``collate`` cuts ``tgt`` into the
teacher-forced decoder input and the loss target and builds the masks, in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from mt_cli.specials import BOS_ID, EOS_ID, PAD_ID


def source_ids(pieces: list[int]) -> list[int]:
    """What the encoder reads: the pieces, then EOS."""
    return pieces + [EOS_ID]


def target_ids(pieces: list[int]) -> list[int]:
    """BOS + pieces + EOS: collate cuts it into the decoder input and the loss target."""
    return [BOS_ID] + pieces + [EOS_ID]


@dataclass
class Batch:
    """Padded tensors plus masks (bool, True = may attend, as in scaled_dot_product_attention)."""

    src: torch.Tensor  # (B, S) long
    tgt_in: torch.Tensor  # (B, T) long: BOS + pieces
    tgt_out: torch.Tensor  # (B, T) long: pieces + EOS, PAD where the loss must ignore
    src_mask: torch.Tensor  # (B, 1, 1, S): key is a real source token
    tgt_mask: torch.Tensor  # (B, 1, T, T): causal and key is a real target token
    src_tokens: int  # real (non-pad) tokens in src
    tgt_tokens: int  # real tokens in tgt_out, i.e. the loss's token count
    n_sentences: int
    # (B, T) float: each target position's weight in the training loss; None: all 1
    # (``TermWeights`` sets it).
    tgt_weight: torch.Tensor | None = None

    def sentence_lengths(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(B,) real source positions (pieces + EOS) and (B,) real decoder positions per sentence."""
        return self.src_mask[:, 0, 0].sum(1), (self.tgt_out != PAD_ID).sum(1)

    def padded(self, multiple: int) -> Batch:
        """The batch with its source and target widths rounded up to a multiple of ``multiple``
        with padding every mask leaves out: fewer shapes, so that a GPU reuses its compiled
        graphs and kernel plans. The token counts stay those of the real tokens."""
        src_extra = -self.src.size(1) % multiple
        tgt_extra = -self.tgt_in.size(1) % multiple
        if not src_extra and not tgt_extra:
            return self
        target_real = F.pad(self.tgt_mask[:, 0, -1], (0, tgt_extra), value=False)  # (B, T'): the last
        # query row sees every key, so its mask row is the key padding alone.
        return replace(
            self,
            src=F.pad(self.src, (0, src_extra), value=PAD_ID),
            src_mask=F.pad(self.src_mask, (0, src_extra), value=False),
            tgt_in=F.pad(self.tgt_in, (0, tgt_extra), value=PAD_ID),
            tgt_out=F.pad(self.tgt_out, (0, tgt_extra), value=PAD_ID),
            tgt_weight=None if self.tgt_weight is None else F.pad(self.tgt_weight, (0, tgt_extra), value=1.0),
            tgt_mask=_target_mask(target_real),
        )

    def to(self, device: torch.device | str) -> Batch:
        """The batch on ``device``. A copy to a GPU goes through pinned memory: from pageable
        memory CUDA waits for the device's queued work before copying, a host stall per batch."""
        tensors = ("src", "tgt_in", "tgt_out", "src_mask", "tgt_mask")
        tensors += ("tgt_weight",) if self.tgt_weight is not None else ()
        pin = torch.device(device).type == "cuda" and not self.src.is_cuda
        moved = {}
        for name in tensors:
            tensor = getattr(self, name)
            moved[name] = (tensor.pin_memory() if pin else tensor).to(device, non_blocking=True)
        return replace(self, **moved)


def _pad(seqs: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, L) ids padded with PAD_ID and the (B, L) bool mask of real positions."""
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    width = int(lengths.max()) if len(seqs) else 0
    real = torch.arange(width) < lengths[:, None]
    ids = torch.full((len(seqs), width), PAD_ID, dtype=torch.long)
    # Boolean-mask assignment fills row-major, which is the order of the flattened sequences.
    ids[real] = torch.tensor([i for s in seqs for i in s], dtype=torch.long)
    return ids, real


def _target_mask(real: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) from the (B, T) real decoder positions: causal, and the key is real. Key
    padding only: pad query rows still see BOS, so no row is fully masked."""
    width = real.size(1)
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    return causal[None, None] & real[:, None, None, :]


def pad_sources(src_ids: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Source ids (B, S) and mask (B, 1, 1, S). Every sequence needs at least one id (EOS):
    an all-False mask row would make attention softmax over nothing (NaN)."""
    src, real = _pad(src_ids)
    return src, real[:, None, None, :]


def collate(src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]]) -> Batch:
    """Pad a batch and build its masks; ``tgt_ids`` carry BOS and EOS (``target_ids``)."""
    if len(src_ids) != len(tgt_ids):
        raise ValueError(f"{len(src_ids)} sources but {len(tgt_ids)} targets")
    if any(len(t) < 2 for t in tgt_ids):
        raise ValueError("every target needs at least BOS and EOS")
    src, src_mask = pad_sources(src_ids)
    # Teacher forcing: predict token t+1 from tokens <= t, shifted per sentence before padding.
    tgt_in, in_real = _pad([t[:-1] for t in tgt_ids])
    tgt_out, out_real = _pad([t[1:] for t in tgt_ids])
    return Batch(
        src=src,
        tgt_in=tgt_in,
        tgt_out=tgt_out,
        src_mask=src_mask,
        tgt_mask=_target_mask(in_real),
        src_tokens=int(src_mask.sum()),
        tgt_tokens=int(out_real.sum()),
        n_sentences=len(src_ids),
    )
