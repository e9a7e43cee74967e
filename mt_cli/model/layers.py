"""Transformer building blocks: feed-forward, encoder/decoder layers, positions (the attention
they use is in ``attention``).

Shapes: B batch, S source length, T target length, D d_model, H heads, Dh = D // H.
Activations are batch-first: (B, T, D).

Masks are boolean with True = may attend (the convention of ``F.scaled_dot_product_attention``)
and are passed to SDPA as they are, never converted to additive floats:

* ``src_mask``: (B, 1, 1, S), source key padding; used by encoder self-attention and decoder
  cross-attention.
* ``tgt_mask``: (B, 1, T, T), causal AND target key padding; used by decoder self-attention
  (on CUDA as SDPA's ``is_causal``: the same for every real position, ``attention``).

They are built once, in the data collate; these modules only consume them. A row with no
allowed key attends to nothing and yields zeros, not NaN.

Attention and feed-forward blocks take their sizes and rates as arguments; the encoder and
decoder layers read theirs from the ``ModelConfig`` that ``Transformer`` passes down.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mt_cli.config.sections import ModelConfig
from mt_cli.model.attention import CrossAttention, SelfAttention
from mt_cli.model.cache import LayerCache
from mt_cli.model.dropout import Dropout
from mt_cli.model.packed import Linear

# The attention classes live in ``attention``; exporters import them from here with the layers.
__all__ = [
    "CrossAttention",
    "DecoderLayer",
    "EncoderLayer",
    "FeedForward",
    "PositionalEncoding",
    "SelfAttention",
]

# "gelu" is the exact (erf) GELU, as Hugging Face's "gelu"; "swish" is SiLU, x * sigmoid(x), the
# activation of Marian's transformer-base (OPUS-MT), Hugging Face's "swish" and "silu".
_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}


class FeedForward(nn.Module):
    """Position-wise D -> d_ff -> D with ReLU, GELU or swish and dropout on the hidden activations."""

    def __init__(self, d_model: int, d_ff: int, activation: str, activation_dropout: float) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation={activation!r}; choose one of {', '.join(_ACTIVATIONS)}")
        self.activation = _ACTIVATIONS[activation]
        self.linear1 = Linear(d_model, d_ff)
        self.linear2 = Linear(d_ff, d_model)
        self.dropout = Dropout(activation_dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))  # (B, L, D)


class EncoderLayer(nn.Module):
    """Self-attention + FFN, each wrapped in dropout, residual and LayerNorm (post- or pre-norm)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm_first = cfg.norm_first
        self.self_attn = SelfAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.activation_dropout)
        self.norm1 = nn.LayerNorm(cfg.d_model)
        self.norm2 = nn.LayerNorm(cfg.d_model)
        self.dropout = Dropout(cfg.dropout)

    def forward(self, x: Tensor, src_mask: Tensor) -> Tensor:
        """x (B, S, D), src_mask (B, 1, 1, S) -> (B, S, D)."""
        if self.norm_first:
            x = x + self.dropout(self.self_attn(self.norm1(x), src_mask)[0])
            return x + self.dropout(self.ffn(self.norm2(x)))
        x = self.norm1(x + self.dropout(self.self_attn(x, src_mask)[0]))
        return self.norm2(x + self.dropout(self.ffn(x)))


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention on the memory, FFN; post- or pre-norm."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm_first = cfg.norm_first
        self.self_attn = SelfAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout)
        self.cross_attn = CrossAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.activation_dropout)
        self.norm1 = nn.LayerNorm(cfg.d_model)
        self.norm2 = nn.LayerNorm(cfg.d_model)
        self.norm3 = nn.LayerNorm(cfg.d_model)
        self.dropout = Dropout(cfg.dropout)

    def start_cache(self, memory: Tensor) -> LayerCache:
        """Cross k/v of memory (B, S, D), once per source; empty self-attention history.

        The history takes k's dtype, so create the cache under the same autocast as the steps.
        """
        k, v = self.cross_attn.project_kv(memory)  # each (B, H, S, Dh)
        # Contiguous once here, since every step and every select reads them again.
        k, v = k.contiguous(), v.contiguous()
        empty = k.new_empty(k.shape[0], k.shape[1], 0, k.shape[3])  # (B, H, 0, Dh), k's dtype
        return LayerCache(empty, empty, k, v)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        """x (B, T, D), memory (B, S, D), src_mask (B, 1, 1, S), tgt_mask (B, 1, T, T) -> (B, T, D)."""
        k, v = self.cross_attn.project_kv(memory)  # each (B, H, S, Dh)
        if self.norm_first:
            x = x + self.dropout(self.self_attn(self.norm1(x), tgt_mask, causal=True)[0])
            x = x + self.dropout(self.cross_attn(self.norm2(x), k, v, src_mask)[0])
            return x + self.dropout(self.ffn(self.norm3(x)))
        x = self.norm1(x + self.dropout(self.self_attn(x, tgt_mask, causal=True)[0]))
        x = self.norm2(x + self.dropout(self.cross_attn(x, k, v, src_mask)[0]))
        return self.norm3(x + self.dropout(self.ffn(x)))

    def step(
        self, x: Tensor, cache: LayerCache, src_bias: Tensor, length: int, need_weights: bool = False
    ) -> tuple[Tensor, LayerCache, Tensor | None]:
        """One position x (B*G, 1, D) after ``length`` cached ones -> (B*G, 1, D), the extended
        cache and, if asked, the cross-attention weights (B*G, H, 1, S); G hypotheses per source
        (see ``DecoderCache``); src_bias (B, 1, 1, S): 0 on real source keys, -inf on padding."""
        if self.norm_first:
            sa, k, v = self.self_attn.step(self.norm1(x), cache.self_k, cache.self_v, length)
            x = x + self.dropout(sa)
            ca, w = self.cross_attn.step(self.norm2(x), cache.cross_k, cache.cross_v, src_bias, need_weights)
            x = x + self.dropout(ca)
            x = x + self.dropout(self.ffn(self.norm3(x)))
        else:
            sa, k, v = self.self_attn.step(x, cache.self_k, cache.self_v, length)
            x = self.norm1(x + self.dropout(sa))
            ca, w = self.cross_attn.step(x, cache.cross_k, cache.cross_v, src_bias, need_weights)
            x = self.norm2(x + self.dropout(ca))
            x = self.norm3(x + self.dropout(self.ffn(x)))
        return x, LayerCache(k, v, cache.cross_k, cache.cross_v), w


class PositionalEncoding(nn.Module):
    """Adds sinusoidal positions (Vaswani et al.): even dims sin, odd dims cos.

    Hugging Face Marian uses the same frequencies with every sin in the first half of the dims and
    every cos in the second: the same table up to a renumbering of the model dimension, which
    ``export.huggingface`` and ``pretrained`` apply to the weights instead of a second layout here.

    The table is a non-persistent buffer: it is a pure function of (max_positions, d_model), so
    checkpoints need not carry it.
    """

    pe: Tensor

    def __init__(self, d_model: int, max_positions: int) -> None:
        super().__init__()
        self.max_positions = max_positions
        pos = torch.arange(max_positions, dtype=torch.float32)[:, None]  # (P, 1)
        freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_positions, d_model)  # (P, D)
        pe[:, 0::2] = torch.sin(pos * freq)
        pe[:, 1::2] = torch.cos(pos * freq)
        self.register_buffer("pe", pe, persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x (B, L, D) holding positions offset..offset+L-1 -> x + positions (B, L, D)."""
        end = offset + x.shape[1]
        if end > self.max_positions:
            raise ValueError(f"position {end - 1} is beyond max_positions={self.max_positions}")
        return x + self.pe[offset:end]  # (B, L, D)
