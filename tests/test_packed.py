"""oneDNN-packed linear layers: the same function as nn.Linear, and a cache that never goes stale."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
import torch.nn.functional as F
from helpers import greedy_tokens, random_model, random_sources

from mt_cli.data.batch import pad_sources
from mt_cli.decode.search import beam_search
from mt_cli.model.packed import Linear, can_pack, pack_for_cpu_inference

pytestmark = pytest.mark.skipif(
    not can_pack(torch.device("cpu"), torch.float32), reason="this torch has no oneDNN (mkldnn)"
)


def _ran_packed(layer: Linear, x: torch.Tensor) -> bool:
    """Whether ``layer(x)`` ran oneDNN's product on the packed weight."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        layer(x)
    return any(event.name == "mkldnn::_linear_pointwise" for event in prof.events())


def _layer(seed: int = 0, bias: bool = True) -> Linear:
    torch.manual_seed(seed)
    return Linear(24, 40, bias=bias).eval()


@pytest.mark.parametrize("bias", [True, False])
def test_packed_layer_computes_the_linear_function(bias: bool) -> None:
    layer = _layer(bias=bias)
    x = torch.randn(7, 3, 24)  # (B, L, D_in): a batch of sequences, as the model feeds it
    plain = F.linear(x, layer.weight, layer.bias)
    assert not _ran_packed(layer, x)
    layer.pack()
    assert layer.is_packed and _ran_packed(layer, x)
    with torch.inference_mode():
        packed = layer(x)
    assert packed.shape == (7, 3, 40)
    torch.testing.assert_close(packed, plain, rtol=1e-5, atol=1e-5)
    assert not torch.equal(x[:, 0], x[:, 1])  # rows differ, so equal outputs mean the product was taken
    strided = x[:, 1]  # (B, D_in) not contiguous, like a decoding step's last position
    torch.testing.assert_close(
        layer(strided), F.linear(strided, layer.weight, layer.bias), rtol=1e-5, atol=1e-5
    )


def test_bf16_packed_layer_equals_plain_bf16() -> None:
    layer = _layer().to(torch.bfloat16)
    x = torch.randn(9, 24, dtype=torch.bfloat16)
    plain = F.linear(x, layer.weight, layer.bias)
    layer.pack()
    torch.testing.assert_close(layer(x), plain, rtol=1e-2, atol=1e-2)


def test_changed_weights_are_used_not_the_stale_pack() -> None:
    layer = _layer()
    layer.pack()
    x = torch.randn(5, 24)
    with torch.no_grad():
        layer.weight.mul_(-2.0)  # in place, as an optimizer step or load_state_dict writes
    assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias)) and not _ran_packed(layer, x)
    other = _layer(seed=1)
    layer.load_state_dict(other.state_dict())
    assert torch.equal(layer(x), F.linear(x, other.weight, other.bias))
    layer.weight = torch.nn.Parameter(torch.zeros(40, 24))  # a new tensor
    assert torch.equal(layer(x), layer.bias.expand(5, 40))


def test_packed_weight_is_used_only_where_f_linear_would_compute_in_its_dtype() -> None:
    layer = _layer()
    layer.pack()
    x = torch.randn(5, 24)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert layer(x).dtype == torch.bfloat16  # autocast's cast, as for nn.Linear
        assert not _ran_packed(layer, x)
    bf16 = _layer().to(torch.bfloat16)
    plain = F.linear(x.bfloat16(), bf16.weight, bf16.bias)
    bf16.pack()
    with torch.autocast("cpu", dtype=torch.bfloat16):  # as mt decodes bf16 weights: the pack is used
        assert torch.equal(bf16(x.bfloat16()), plain) and _ran_packed(bf16, x.bfloat16())
    layer.to(torch.bfloat16)  # the fp32 pack is stale: the weight is another tensor now
    out = layer(x.bfloat16())
    assert torch.equal(out, F.linear(x.bfloat16(), layer.weight, layer.bias))


def test_copies_and_state_dicts_do_not_carry_the_pack() -> None:
    model = random_model()
    keys = set(model.state_dict())
    assert pack_for_cpu_inference(model, torch.float32) == sum(isinstance(m, Linear) for m in model.modules())
    assert set(model.state_dict()) == keys
    clone = copy.deepcopy(model)
    restored = pickle.loads(pickle.dumps(model.output))
    assert not clone.output.is_packed and not restored.is_packed
    assert model.output.is_packed
    assert torch.equal(clone.output.weight, model.output.weight)


def test_packed_model_decodes_like_the_plain_one() -> None:
    plain, packed = random_model(seed=3), random_model(seed=3)
    pack_for_cpu_inference(packed, torch.float32)
    src, src_mask = pad_sources(random_sources(16, seed=4))
    assert greedy_tokens(packed, src, src_mask, 1.2, 5) == greedy_tokens(plain, src, src_mask, 1.2, 5)
    beams = [beam_search(m, src, src_mask, 4, 1.0, 1.2, 5, n_best=2) for m in (packed, plain)]
    assert [[h.tokens for h in hyps] for hyps in beams[0]] == [[h.tokens for h in hyps] for hyps in beams[1]]
    for hyps_packed, hyps_plain in zip(*beams):
        for a, b in zip(hyps_packed, hyps_plain):
            assert a.score == pytest.approx(b.score, abs=1e-4)
