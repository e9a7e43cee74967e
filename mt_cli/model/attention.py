"""Multi-head attention on ``scaled_dot_product_attention``: self-attention with a fused QKV
projection and an in-place growing KV buffer for decoding steps, cross-attention with a fused KV
projection whose beams share one copy of the source's keys and values.

Shapes: B batch, L queries, M keys, D d_model, H heads, Dh = D // H. Masks are boolean with
True = may attend, passed to SDPA as they are (see ``layers``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mt_cli.model.packed import Linear


def _explicit_for_training(q: Tensor) -> bool:
    """Whether to train attention as two products and a softmax instead of SDPA: bf16/fp16 on the CPU.

    There SDPA's flash kernel has a backward several times slower than the math kernel at NMT
    lengths (torch 2.13, (64, 4, 21, 64) bf16 fwd+bwd: ~14 ms vs ~5 ms), and the math kernel
    casts q, k and v to fp32 and its output back; the explicit form stays in bf16 (the softmax
    kernel accumulates in fp32 inside): a training update 3.5% faster than with the math kernel
    (benchmarks.md, "The training update"). Inference and fp32 keep SDPA's choice.
    """
    return q.requires_grad and q.device.type == "cpu" and q.dtype in (torch.bfloat16, torch.float16)


def _causal_by_position(q: Tensor) -> bool:
    """Whether the decoder's self-attention passes SDPA ``is_causal`` in place of its mask: on CUDA,
    where a boolean mask rules out SDPA's flash kernel.

    For every real target position the two are the same: padding follows the real positions, so
    each key a real position may see (its past) is real. Only the padded positions' outputs
    differ, and nothing reads them: the loss skips them and no real position attends to them.
    The CPU keeps the mask, and its numbers.
    """
    return q.is_cuda


# ATen's CPU bmm multiplies matrices of fewer multiply-adds than this in a scalar loop (torch 2.13),
# ~2x slower than a broadcast product and a sum at the first steps of decoding (L*M*Dh < 400).
_SCALAR_BMM_BELOW = 400


def _scalar_bmm(x: Tensor, multiply_adds: int) -> bool:
    """Whether a batched product of ``x`` with ``multiply_adds`` per matrix would take that loop:
    fp32 on the CPU (in bf16 a broadcast product would round each term)."""
    return multiply_adds < _SCALAR_BMM_BELOW and x.dtype == torch.float32 and x.device.type == "cpu"


def _scores(q: Tensor, k: Tensor) -> Tensor:
    """q (B, H, L, Dh) times k (B, H, M, Dh) over Dh: (B, H, L, M)."""
    if _scalar_bmm(q, q.size(-2) * q.size(-1) * k.size(-2)):
        return (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1)  # (B, H, L, 1, Dh) * (B, H, 1, M, Dh), summed
    return q @ k.transpose(-2, -1)


def _context(weights: Tensor, v: Tensor) -> Tensor:
    """weights (B, H, L, M) times v (B, H, M, Dh) over M: (B, H, L, Dh)."""
    if _scalar_bmm(weights, weights.size(-2) * weights.size(-1) * v.size(-1)):
        return (weights.unsqueeze(-1) * v.unsqueeze(-3)).sum(-2)  # (B, H, L, M, 1) * (B, H, 1, M, Dh), summed
    return weights @ v


# torch 2.13's CPU softmax runs a scalar loop over rows shorter than one vector of fp32 lanes
# (16 with AVX-512, 8 with AVX2): 13x slower at 15 keys than at 16 (2,000 rows: 365 vs 27 us on a
# Zen 5). Decoding's first 15 steps and short sources are that short; max, exp and a sum over the
# whole tensor are not slowed by it. scripts/short-softmax.py measures it.
_SOFTMAX_LANES = 16 if torch.backends.cpu.get_cpu_capability() == "AVX512" else 8


def _softmax(scores: Tensor) -> Tensor:
    """Softmax over the last dimension of fresh ``scores`` (overwritten when no gradient flows)."""
    # Five element-wise passes cost more than the loop below ~500 elements (a step's last rows).
    short = scores.size(-1) < _SOFTMAX_LANES and scores.numel() >= 512 and not scores.requires_grad
    if short and scores.dtype == torch.float32 and scores.device.type == "cpu":
        exp = scores.sub_(scores.amax(-1, keepdim=True)).exp_()
        return exp.div_(exp.sum(-1, keepdim=True))
    return torch.softmax(scores, dim=-1)


def source_bias(src_mask: Tensor, dtype: torch.dtype) -> Tensor:
    """The additive form of a source mask (B, 1, 1, S): 0 where True, -inf where False."""
    return torch.zeros(src_mask.shape, dtype=dtype, device=src_mask.device).masked_fill_(
        ~src_mask, float("-inf")
    )


class MultiHeadAttention(nn.Module):
    """Shared part of self- and cross-attention: head split/merge, SDPA and the output projection.

    The input projections live in the subclasses so that each can be one fused matmul.
    """

    def __init__(self, d_model: int, n_heads: int, attention_dropout: float) -> None:
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.attention_dropout = attention_dropout
        self.out = Linear(d_model, d_model)

    def _reset(self, *projections: nn.Linear) -> None:
        # Xavier on the fused matrices and zero biases, as nn.MultiheadAttention does.
        for linear in (*projections, self.out):
            nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(linear.bias)

    def _heads(self, x: Tensor, parts: int) -> Tensor:
        """(B, L, parts*D) -> (parts, B, H, L, Dh), a view: no copy."""
        b, length, _ = x.shape
        return x.view(b, length, parts, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None,
        need_weights: bool = False,
        causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """q (B, H, L, Dh), k/v (B, H, M, Dh), mask broadcastable to (B, H, L, M); ``causal``:
        the mask is causal AND right padding (``_causal_by_position``).

        Returns the projected output (B, L, D) and, if asked, the attention weights
        (B, H, L, M) before dropout.
        """
        p = self.attention_dropout if self.training else 0.0
        if need_weights or _explicit_for_training(q):
            # SDPA does not return its weights, nor trains fast in bf16 on the CPU: computed here.
            weights = self._weights(q, k, mask)  # (B, H, L, M)
            ctx = F.dropout(weights, p, self.training) @ v  # (B, H, L, Dh)
        elif causal and _causal_by_position(q):
            ctx = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)  # (B, H, L, Dh)
        else:
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # (B, H, L, Dh)
        return self._merge(ctx), weights if need_weights else None

    def attend_step(
        self, q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """``attend`` for a decoding step (inference, a few queries per row): two matrix products.

        SDPA's CPU kernel (flash attention) tiles for long query blocks; with one query per
        hypothesis it spends most of a beam step there (torch 2.13: ~4x the two products for
        (1000, 4, 1, 64) queries over 30 keys). ``bias`` (broadcastable to (B, H, L, M); None: every
        key), added to the scores, masks in one addition what a boolean mask does in two fills (a
        row must keep a key). Returns (B, L, D) and, if asked, the weights.
        """
        weights = self._weights(q, k, None, bias)  # (B, H, L, M)
        ctx = _context(weights, v)  # (B, H, L, Dh)
        return self._merge(ctx), weights if need_weights else None  # (B, L, D)

    def _weights(self, q: Tensor, k: Tensor, mask: Tensor | None, bias: Tensor | None = None) -> Tensor:
        """Softmax attention weights (B, H, L, M) in q's dtype (softmax accumulates in fp32)."""
        scores = _scores(q, k)  # (B, H, L, M)
        scores.mul_(self.head_dim**-0.5)
        if bias is not None:
            scores.add_(bias)
        if mask is None:
            return _softmax(scores)
        weights = _softmax(scores.masked_fill_(~mask, float("-inf")))  # (B, H, L, M)
        # A row with no allowed key is all NaN after softmax; make it attend to nothing.
        return weights.masked_fill(~mask, 0.0)

    def _merge(self, ctx: Tensor) -> Tensor:
        """ctx (B, H, L, Dh) -> heads merged and projected, (B, L, D)."""
        b, _, length, _ = ctx.shape
        return self.out(ctx.transpose(1, 2).reshape(b, length, self.d_model))  # (B, L, D)


class SelfAttention(MultiHeadAttention):
    """Self-attention with one fused QKV projection (D -> 3D)."""

    def __init__(self, d_model: int, n_heads: int, attention_dropout: float) -> None:
        super().__init__(d_model, n_heads, attention_dropout)
        self.qkv = Linear(d_model, 3 * d_model)
        self._reset(self.qkv)

    def forward(
        self, x: Tensor, mask: Tensor | None, need_weights: bool = False, causal: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, T, D); ``causal``: ``mask`` is causal AND right padding (the decoder's)."""
        q, k, v = self._heads(self.qkv(x), 3).unbind(0)  # each (B, H, T, Dh)
        return self.attend(q, k, v, mask, need_weights, causal)

    def step(self, x: Tensor, past_k: Tensor, past_v: Tensor, length: int) -> tuple[Tensor, Tensor, Tensor]:
        """One new position x (B, 1, D) after ``length`` cached positions of the k/v buffers
        (B, H, capacity, Dh).

        The new k/v are written in place at position ``length``; a full buffer is first replaced
        by one of twice the capacity, so appending costs no copy of the history at most steps.
        No mask: the query is the newest position, so every cached key is in its past.
        Returns the output (B, 1, D) and the buffers (B, H, capacity', Dh), now ``length + 1`` long.
        """
        q, k, v = self._heads(self.qkv(x), 3).unbind(0)  # each (B, H, 1, Dh)
        if length == past_k.size(2):
            past_k, past_v = _grown(past_k, length), _grown(past_v, length)
        past_k[:, :, length] = k[:, :, 0]
        past_v[:, :, length] = v[:, :, 0]
        out, _ = self.attend_step(
            q, past_k[:, :, : length + 1], past_v[:, :, : length + 1], None
        )  # over (B, H, t+1, Dh)
        return out, past_k, past_v


def _grown(buffer: Tensor, length: int) -> Tensor:
    """A copy of ``buffer`` (B, H, length, Dh) with room for twice as many positions (at least 8)."""
    b, h, _, dh = buffer.shape
    grown = buffer.new_empty(b, h, max(8, 2 * length), dh)
    grown[:, :, :length] = buffer
    return grown


class CrossAttention(MultiHeadAttention):
    """Attention from the decoder onto the encoder memory: a q projection and a fused KV (D -> 2D)."""

    def __init__(self, d_model: int, n_heads: int, attention_dropout: float) -> None:
        super().__init__(d_model, n_heads, attention_dropout)
        self.q = Linear(d_model, d_model)
        self.kv = Linear(d_model, 2 * d_model)
        self._reset(self.q, self.kv)

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """memory (B, S, D) -> k, v each (B, H, S, Dh), strided views of one matmul."""
        k, v = self._heads(self.kv(memory), 2).unbind(0)
        return k, v

    def forward(
        self, x: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        q = self._heads(self.q(x), 1)[0]  # (B, H, T, Dh)
        return self.attend(q, k, v, mask, need_weights)

    def step(
        self, x: Tensor, k: Tensor, v: Tensor, bias: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """One position for G hypotheses per source: x (B*G, 1, D), rows grouped by source, onto
        that source's k/v (B, H, S, Dh) and additive mask ``bias`` (B, 1, 1, S): 0 for a real key,
        -inf for padding (``source_bias``; every source has a real key, its EOS).

        Each source's G queries attend as one (G, S) block, so beams share one copy of the
        source's k/v instead of reading a copy each. Returns (B*G, 1, D) and, if asked, the
        weights (B*G, H, 1, S).
        """
        sources = k.size(0)
        q = self.q(x).view(sources, -1, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, G, Dh)
        out, weights = self.attend_step(q, k, v, bias, need_weights)  # (B, G, D), (B, H, G, S)
        if weights is not None:
            weights = weights.transpose(1, 2).reshape(-1, self.n_heads, 1, weights.size(-1))  # (B*G, H, 1, S)
        return out.reshape(-1, 1, self.d_model), weights  # (B*G, 1, D)
