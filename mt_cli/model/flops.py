"""Model FLOPs of a training step, for model FLOPs utilisation (MFU; Chowdhery et al. 2022).

Counted as the model needs them, not as the kernels happen to run: every matrix product of the
layers on real (non-pad) tokens, attention scores and weighted sums over each sentence's real
length (the decoder's causal self-attention counted whole, as nanoGPT and PaLM do), and the output
projection over the target vocabulary. Embedding lookups, norms, softmax and dropout are left
out. A multiply-add is 2 FLOPs; backward costs twice forward, so a training step is 3x forward.
"""

from __future__ import annotations

from torch import Tensor

from mt_cli.config.sections import ModelConfig


def training_flops(cfg: ModelConfig, tgt_vocab_size: int, src_lengths: Tensor, tgt_lengths: Tensor) -> float:
    """FLOPs of forward + backward on sentences of these real lengths ((B,) each: source pieces +
    EOS, and decoder positions)."""
    d, ff = cfg.d_model, cfg.d_ff
    s, t = src_lengths.double(), tgt_lengths.double()
    src_tokens, tgt_tokens = float(s.sum()), float(t.sum())
    encoder = (4 * d * d + 2 * d * ff) * src_tokens + 2 * d * float((s * s).sum())  # qkvo + ffn; QK^T, AV
    decoder = (
        (4 * d * d + 2 * d * ff) * tgt_tokens  # self-attention qkvo + ffn
        + 2 * d * d * tgt_tokens  # cross-attention query and output projections
        + 2 * d * d * src_tokens  # cross-attention keys and values of the source
        + 2 * d * float((t * t).sum())  # self-attention QK^T and AV
        + 2 * d * float((s * t).sum())  # cross-attention QK^T and AV
    )
    multiply_adds = (
        cfg.encoder_layers * encoder + cfg.decoder_layers * decoder + d * tgt_vocab_size * tgt_tokens
    )
    return 3 * 2 * multiply_adds
