"""Word alignments from cross-attention: Pharaoh ``i-j`` pairs, as fairseq ``--print-alignment``.

fairseq's convention: the cross-attention of one decoder layer (the last by default), averaged
over its heads, while the decoder is forced along the target; each target piece aligns to the
source piece it attends to most, never to the source EOS; the target EOS aligns to nothing.
Pieces are then mapped to words (a word starts at a piece beginning with SentencePiece's "▁"),
so the indices are those of the whitespace-separated words of the source line and of the
detokenized translation, 0-based.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from mt_cli.decode.hypotheses import Decoder
from mt_cli.specials import BOS_ID, PAD_ID, WORD_START


@torch.inference_mode()
def attention_matrix(
    model: Decoder,
    src: Tensor,
    src_mask: Tensor,
    targets: Sequence[Sequence[int]],
    layer: int | None = None,
) -> list[Tensor]:
    """Per sentence, the cross-attention of decoder layer ``layer`` (None: the last; negative
    counts from the end) averaged over heads while forcing its target, fp32 on the CPU.

    ``src`` (B, S) and ``src_mask`` (B, 1, 1, S) as for the searches; ``targets`` are piece ids
    without BOS/EOS, at most ``max_positions - 1`` of them with the EOS. Sentence i gives
    (len(targets[i]) + 1, S_i): a row per predicted token (each piece, then EOS) over its S_i
    real source positions (its pieces, then EOS); rows sum to 1. For an ``Ensemble``, the mean
    of its members' matrices (as fairseq's ensembles do).
    """
    batch = src.size(0)
    if len(targets) != batch:
        raise ValueError(f"{batch} sources but {len(targets)} targets")
    steps = max((len(t) for t in targets), default=0) + 1
    inputs = torch.full((batch, steps), PAD_ID, dtype=torch.long)  # (B, T): BOS + target, padded
    inputs[:, 0] = BOS_ID
    for row, target in enumerate(targets):
        inputs[row, 1 : len(target) + 1] = torch.tensor(list(target), dtype=torch.long)
    inputs = inputs.to(src.device)
    # Stepping with the cache is the teacher-forced pass (a step equals the full pass's position)
    # and the one path that returns attention; rows past a target's end are dropped below.
    cache = model.start_cache(model.encode(src, src_mask), src_mask)
    rows = []
    for t in range(steps):
        _, cache, weights = model.step(inputs[:, t], cache, return_attention=True, attention_layer=layer)
        assert weights is not None  # asked for
        rows.append(weights.float())  # (B, S)
    attention = torch.stack(rows, dim=1).cpu()  # (B, T, S)
    src_lengths = src_mask.reshape(batch, -1).sum(-1).tolist()  # (B,) real positions, EOS included
    return [attention[i, : len(t) + 1, : src_lengths[i]] for i, t in enumerate(targets)]


def piece_to_word(pieces: Sequence[str]) -> list[int]:
    """The 0-based word index of each SentencePiece piece, counting the words that splitting the
    detokenized text on whitespace gives: a piece starting with "▁" starts a word, others continue
    the previous one (the first piece always starts word 0).

    A piece that is only "▁" is a space, not a word: "▁ ▁ ." detokenizes to "  .", one word. So
    it belongs to the word that follows it (or, at the end, to the one before).
    """
    words: list[int] = []
    spaces: list[int] = []  # positions of the pieces that are only "▁"
    index, boundary = -1, True
    for position, piece in enumerate(pieces):
        boundary = boundary or piece.startswith(WORD_START)
        if not piece.lstrip(WORD_START):
            spaces.append(position)
        elif boundary or index < 0:
            index, boundary = index + 1, False
        words.append(index)
    following = max(index, 0)
    for position in reversed(range(len(words))):  # a space takes the index of the word after it
        if spaces and spaces[-1] == position:
            spaces.pop()
            words[position] = following
        else:
            following = words[position]
    return words


def word_alignment(
    attention: Tensor, src_pieces: Sequence[str], tgt_pieces: Sequence[str]
) -> list[tuple[int, int]]:
    """Sorted, distinct (source word, target word) pairs from an attention matrix (T, S) whose
    first rows are ``tgt_pieces`` and first columns ``src_pieces`` (pieces without EOS).

    Further rows and columns (the target and source EOS, padding) are dropped before the argmax,
    as fairseq does, so every target piece aligns to a real source piece. Target word j aligns
    to source word i when any piece of j attends most to a piece of i.
    """
    if not src_pieces or not tgt_pieces:
        return []
    if attention.size(0) < len(tgt_pieces) or attention.size(1) < len(src_pieces):
        raise ValueError(
            f"attention {tuple(attention.shape)} does not cover {len(tgt_pieces)} target "
            f"and {len(src_pieces)} source pieces"
        )
    best = attention[: len(tgt_pieces), : len(src_pieces)].argmax(-1).tolist()  # (T',) first maximum
    src_words, tgt_words = piece_to_word(src_pieces), piece_to_word(tgt_pieces)
    return sorted({(src_words[s], tgt_words[t]) for t, s in enumerate(best)})


def pharaoh(pairs: Sequence[tuple[int, int]]) -> str:
    """Pharaoh format: ``i-j`` per pair (source-target, 0-based), space-separated, in the given order."""
    return " ".join(f"{i}-{j}" for i, j in pairs)
