"""Layer-level checks: parity with torch.nn, masks, NaN safety, positions and the KV cache type.

Masks here follow the package convention (True = may attend); torch.nn takes the opposite
(True = masked), so the parity tests invert them.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from mt_cli.config.sections import ModelConfig
from mt_cli.model.layers import (
    CrossAttention,
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    PositionalEncoding,
    SelfAttention,
)

D, H, FF = 32, 4, 64


def _layer_config(norm_first: bool, activation: str = "relu", dropout: float = 0.0) -> ModelConfig:
    return ModelConfig(
        d_model=D,
        n_heads=H,
        d_ff=FF,
        dropout=dropout,
        attention_dropout=dropout,
        activation_dropout=dropout,
        activation=activation,
        norm_first=norm_first,
    )


def _lengths_to_keep(lengths: list[int], total: int) -> torch.Tensor:
    """(B, total) True at real positions."""
    return torch.arange(total)[None, :] < torch.tensor(lengths)[:, None]


def _copy_common(ours: nn.Module, ref: nn.Module, norms: int) -> None:
    ours.ffn.linear1.load_state_dict(ref.linear1.state_dict())
    ours.ffn.linear2.load_state_dict(ref.linear2.state_dict())
    for i in range(1, norms + 1):
        getattr(ours, f"norm{i}").load_state_dict(getattr(ref, f"norm{i}").state_dict())
    ours.self_attn.qkv.weight.data.copy_(ref.self_attn.in_proj_weight)
    ours.self_attn.qkv.bias.data.copy_(ref.self_attn.in_proj_bias)
    ours.self_attn.out.load_state_dict(ref.self_attn.out_proj.state_dict())


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(norm_first: bool, activation: str) -> None:
    torch.manual_seed(0)
    ref = nn.TransformerEncoderLayer(
        D, H, FF, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first
    )
    ours = EncoderLayer(_layer_config(norm_first, activation))
    _copy_common(ours, ref, norms=2)
    x = torch.randn(3, 7, D)
    keep = _lengths_to_keep([7, 4, 1], 7)  # (B, S)
    expected = ref(x, src_key_padding_mask=~keep)
    got = ours(x, keep[:, None, None, :])
    torch.testing.assert_close(got[keep], expected[keep], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first: bool) -> None:
    torch.manual_seed(0)
    ref = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    ours = DecoderLayer(_layer_config(norm_first))
    _copy_common(ours, ref, norms=3)
    ours.cross_attn.q.weight.data.copy_(ref.multihead_attn.in_proj_weight[:D])
    ours.cross_attn.q.bias.data.copy_(ref.multihead_attn.in_proj_bias[:D])
    ours.cross_attn.kv.weight.data.copy_(ref.multihead_attn.in_proj_weight[D:])
    ours.cross_attn.kv.bias.data.copy_(ref.multihead_attn.in_proj_bias[D:])
    ours.cross_attn.out.load_state_dict(ref.multihead_attn.out_proj.state_dict())

    x, memory = torch.randn(3, 6, D), torch.randn(3, 5, D)
    src_keep = _lengths_to_keep([5, 3, 2], 5)
    tgt_keep = _lengths_to_keep([6, 6, 2], 6)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    expected = ref(
        x, memory, tgt_mask=~causal, tgt_key_padding_mask=~tgt_keep, memory_key_padding_mask=~src_keep
    )
    got = ours(x, memory, src_keep[:, None, None, :], causal & tgt_keep[:, None, None, :])
    torch.testing.assert_close(got[tgt_keep], expected[tgt_keep], atol=1e-5, rtol=1e-5)


def test_attention_weights_path_matches_sdpa_and_is_causal() -> None:
    torch.manual_seed(0)
    attn = SelfAttention(D, H, 0.0).eval()
    x = torch.randn(2, 6, D)
    mask = (
        torch.ones(6, 6, dtype=torch.bool).tril()[None, None] & _lengths_to_keep([6, 4], 6)[:, None, None, :]
    )
    out_sdpa, none = attn(x, mask)
    out_explicit, weights = attn(x, mask, need_weights=True)
    assert none is None
    torch.testing.assert_close(out_explicit, out_sdpa, atol=1e-5, rtol=1e-5)
    assert weights.shape == (2, H, 6, 6)
    future = ~torch.ones(6, 6, dtype=torch.bool).tril()
    assert weights[..., future].abs().max().item() == 0.0  # exactly no mass on the future
    assert weights[1, ..., 4:].abs().max().item() == 0.0  # nor on padding keys
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, H, 6))


def test_bf16_training_attention_follows_fp32_sdpa_in_value_and_gradient() -> None:
    """bf16 training on the CPU takes the explicit path (two products and a softmax)."""
    torch.manual_seed(4)
    attn = SelfAttention(D, H, 0.0).train()
    x = torch.randn(3, 7, D)
    mask = (
        torch.ones(7, 7, dtype=torch.bool).tril()[None, None]
        & _lengths_to_keep([7, 5, 2], 7)[:, None, None, :]
    )
    outputs, grads = [], []
    for dtype in (torch.float32, torch.bfloat16):
        xd = x.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            out, _ = attn(xd, mask)
        assert out.dtype == dtype
        out.float().square().sum().backward()
        outputs.append(out.float())
        grads.append(xd.grad)
    torch.testing.assert_close(outputs[1], outputs[0], atol=0.05, rtol=0.02)
    torch.testing.assert_close(grads[1], grads[0], atol=0.1, rtol=0.05)


def test_fully_masked_row_gives_zeros_not_nan() -> None:
    torch.manual_seed(0)
    attn = CrossAttention(D, H, 0.0)
    x, memory = torch.randn(2, 3, D, requires_grad=True), torch.randn(2, 4, D)
    mask = torch.ones(2, 1, 1, 4, dtype=torch.bool)
    mask[1] = False  # a source with no real token
    for need_weights in (False, True):
        k, v = attn.project_kv(memory)
        out, weights = attn(x, k, v, mask, need_weights)
        assert torch.isfinite(out).all()
        out.sum().backward()
        assert torch.isfinite(x.grad).all()
        x.grad = None
        if need_weights:
            assert torch.isfinite(weights).all() and weights[1].abs().max().item() == 0.0
    # The masked row only sees the output bias: SDPA and the explicit path agree on "attend to nothing".
    with torch.no_grad():
        torch.testing.assert_close(attn(x, *attn.project_kv(memory), mask)[0][1], attn.out.bias.expand(3, D))


def test_self_attention_step_matches_full() -> None:
    torch.manual_seed(0)
    attn = SelfAttention(D, H, 0.0).eval()
    x = torch.randn(2, 20, D)
    full, _ = attn(x, torch.ones(20, 20, dtype=torch.bool).tril())
    k = v = torch.zeros(2, H, 0, D // H)
    capacities = []
    for t in range(20):
        out, k, v = attn.step(x[:, t : t + 1], k, v, t)
        torch.testing.assert_close(out[:, 0], full[:, t], atol=1e-5, rtol=1e-5)
        capacities.append(k.size(2))
    assert capacities == [8] * 8 + [16] * 8 + [32] * 4  # grows by doubling, not at every step
    _, k_again, _ = attn.step(x[:, 5:6], k, v, 5)  # writes position 5 in place: no new buffer
    assert k_again.data_ptr() == k.data_ptr()


def test_feed_forward_rejects_unknown_activation() -> None:
    with pytest.raises(ValueError, match="activation"):
        FeedForward(D, FF, "tanh", 0.0)
    assert FeedForward(D, FF, "gelu", 0.0)(torch.randn(2, 3, D)).shape == (2, 3, D)


def test_dropout_only_in_training() -> None:
    torch.manual_seed(0)
    layer = EncoderLayer(_layer_config(norm_first=False, dropout=0.5))
    x, mask = torch.randn(2, 5, D), torch.ones(2, 1, 1, 5, dtype=torch.bool)
    layer.train()
    assert not torch.allclose(layer(x, mask), layer(x, mask))
    layer.eval()
    torch.testing.assert_close(layer(x, mask), layer(x, mask), atol=0, rtol=0)


def test_positional_encoding_values_and_offset() -> None:
    pe = PositionalEncoding(8, 50)
    assert "pe" not in pe.state_dict()
    x = torch.zeros(1, 10, 8)
    table = pe(x)[0]  # (10, 8)
    pos, i = 3, 1
    assert math.isclose(table[pos, 2 * i].item(), math.sin(pos / 10000 ** (2 * i / 8)), abs_tol=1e-6)
    assert math.isclose(table[pos, 2 * i + 1].item(), math.cos(pos / 10000 ** (2 * i / 8)), abs_tol=1e-6)
    torch.testing.assert_close(pe(x[:, :1], offset=7)[0, 0], table[7])
    with pytest.raises(ValueError, match="max_positions"):
        pe(torch.zeros(1, 3, 8), offset=48)


@pytest.mark.parametrize("keys", [1, 3, 6, 7, 15, 16, 17, 40])
def test_decoding_attention_paths_equal_the_plain_products(keys: int) -> None:
    """Short rows and small products take other kernels than torch.softmax and bmm (``attention``
    module notes); the values are the same to float rounding, fully masked rows NaN as in torch."""
    from mt_cli.model.attention import _context, _scores, _softmax

    torch.manual_seed(keys)
    q, k, v = torch.randn(160, H, 1, 8), torch.randn(160, H, keys, 8), torch.randn(160, H, keys, 8)
    scores = _scores(q, k)
    torch.testing.assert_close(scores, q @ k.transpose(-2, -1), atol=1e-5, rtol=1e-5)
    scores[0, :, :, -1] = float("-inf")  # a masked key
    scores[1] = float("-inf")  # a row with no key at all
    expected = torch.softmax(scores, -1)
    with torch.inference_mode():
        weights = _softmax(scores.clone())
    torch.testing.assert_close(weights[2:], expected[2:], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(
        weights[0], expected[0], atol=1e-6, rtol=1e-5, equal_nan=True
    )  # 1 key: none left
    assert weights[1].isnan().all() and expected[1].isnan().all()
    torch.testing.assert_close(_context(weights[2:], v[2:]), weights[2:] @ v[2:], atol=1e-5, rtol=1e-5)
