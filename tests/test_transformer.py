"""Model-level checks: causality, padding invariance, cache parity, tying, init, counts, learning.

Masks follow the package convention: boolean, True = may attend.
"""

from __future__ import annotations

import dataclasses
import io
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mt_cli.config.sections import ModelConfig
from mt_cli.model.cache import DecoderCache
from mt_cli.model.transformer import ENCODE_ROWS, Transformer, build_model, count_parameters
from mt_cli.specials import BOS_ID

PAD, BOS, EOS = 0, 2, 3
TINY = ModelConfig(
    d_model=32, n_heads=4, d_ff=64, encoder_layers=2, decoder_layers=3, dropout=0.0, max_positions=64
)


def tiny(
    norm_first: bool = False, src_vocab: int = 50, tgt_vocab: int = 40, **changes: object
) -> Transformer:
    torch.manual_seed(0)
    cfg = dataclasses.replace(TINY, norm_first=norm_first, **changes)
    return build_model(cfg, src_vocab, tgt_vocab).eval()


def src_mask(src: torch.Tensor) -> torch.Tensor:
    return (src != PAD)[:, None, None, :]  # (B, 1, 1, S)


def tgt_mask(tgt: torch.Tensor) -> torch.Tensor:
    t = tgt.shape[1]
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    return causal & (tgt != PAD)[:, None, None, :]  # (B, 1, T, T)


def random_batch(
    b: int, s: int, t: int, src_lengths: list[int] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.randint(4, 50, (b, s))
    for row, length in enumerate(src_lengths or []):
        src[row, length:] = PAD
    tgt = torch.randint(4, 40, (b, t))
    tgt[:, 0] = BOS
    return src, tgt


def logits_of(model: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    return model(src, tgt, src_mask(src), tgt_mask(tgt))  # (B, T, V)


@pytest.mark.parametrize("norm_first", [False, True])
def test_causal(norm_first: bool) -> None:
    model = tiny(norm_first)
    src, tgt = random_batch(2, 5, 7)
    before = logits_of(model, src, tgt)
    changed = tgt.clone()
    changed[:, 4] = (changed[:, 4] + 1 - 4) % 36 + 4
    after = logits_of(model, src, changed)
    torch.testing.assert_close(after[:, :4], before[:, :4], atol=1e-6, rtol=0)
    assert (after[:, 4:] - before[:, 4:]).abs().amax(-1).min() > 1e-4


@pytest.mark.parametrize("norm_first", [False, True])
def test_padding_invariance(norm_first: bool) -> None:
    model = tiny(norm_first)
    src, tgt = random_batch(3, 6, 5, src_lengths=[6, 3, 1])
    expected = logits_of(model, src, tgt)
    padded_src = F.pad(src, (0, 4), value=PAD)
    padded_tgt = F.pad(tgt, (0, 3), value=PAD)
    got = logits_of(model, padded_src, padded_tgt)
    torch.testing.assert_close(got[:, :5], expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_is_causal_in_place_of_the_decoder_mask_changes_no_real_position(
    monkeypatch, norm_first: bool
) -> None:
    """CUDA's decoder self-attention (SDPA ``is_causal``, no mask), run here on the CPU: the
    logits of every real target position and every gradient are those of the masked path."""
    from mt_cli.model import attention

    src, tgt = random_batch(3, 6, 7, src_lengths=[6, 3, 1])
    tgt[1, 4:] = PAD  # right padding, as collate makes it
    tgt[2, 2:] = PAD
    real = tgt != PAD
    found = []
    for by_position in (False, True):
        monkeypatch.setattr(attention, "_causal_by_position", lambda q, chosen=by_position: chosen)
        model = tiny(norm_first).train()  # dropout 0: the same function in both
        logits = logits_of(model, src, tgt)
        logits[real].logsumexp(-1).sum().backward()
        found.append((logits.detach(), [p.grad for p in model.parameters()]))
    (masked, masked_grads), (causal, causal_grads) = found
    torch.testing.assert_close(causal[real], masked[real], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(causal[~real], masked[~real], atol=1e-3)  # padded rows: not compared
    for got, expected in zip(causal_grads, masked_grads):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


def step_all(
    model: Transformer, cache: DecoderCache, tokens: torch.Tensor, start: int = 0
) -> tuple[torch.Tensor, DecoderCache]:
    """Feed tokens[:, start:] one step at a time; logits (B, T - start, V) and the final cache."""
    out = []
    for t in range(start, tokens.shape[1]):
        logits, cache, _ = model.step(tokens[:, t], cache)
        out.append(logits)
    return torch.stack(out, 1), cache  # (B, T', V)


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_steps_equal_full_decode(norm_first: bool) -> None:
    model = tiny(norm_first)
    src, tgt = random_batch(3, 6, 7, src_lengths=[6, 4, 2])
    full = logits_of(model, src, tgt)
    with torch.no_grad():
        memory = model.encode(src, src_mask(src))
        cache = model.start_cache(memory, src_mask(src))
        stepped, cache = step_all(model, cache, tgt)
    assert stepped.dtype == torch.float32 and cache.length == 7
    torch.testing.assert_close(stepped, full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("grouped", [True, False])
def test_cache_reorder_and_select_for_beams(grouped: bool) -> None:
    """Beams as one query block per source (expand_beams) or as copied sources: both exact."""
    model = tiny(norm_first=True)
    beams, steps_before = 3, 3
    src, _ = random_batch(2, 6, 1, src_lengths=[6, 4])
    torch.manual_seed(1)
    hyps = torch.randint(4, 40, (2 * beams, 7))
    hyps[:, 0] = BOS
    with torch.no_grad():
        memory = model.encode(src, src_mask(src))
        cache = model.start_cache(memory, src_mask(src))
        if grouped:
            cache = cache.expand_beams(beams)
            assert cache.layers[0].cross_k.shape[0] == 2 and cache.layers[0].self_k.shape[0] == 2 * beams
        else:
            cache = cache.select(torch.arange(2).repeat_interleave(beams))
        _, cache = step_all(model, cache, hyps[:, :steps_before])
        # Each row takes over the history of another beam of the same source, as in beam search.
        index = torch.tensor([2, 0, 0, 4, 5, 3])
        cache = cache.reorder(index)
        hyps = torch.cat([hyps[index, :steps_before], hyps[:, steps_before:]], 1)
        stepped, cache = step_all(model, cache, hyps, start=steps_before)
        expanded = src.repeat_interleave(beams, 0)
        full = logits_of(model, expanded, hyps)
        torch.testing.assert_close(stepped, full[:, steps_before:], atol=1e-5, rtol=1e-5)

        # Dropping a finished source keeps the other exact, also when its beams move.
        keep = torch.tensor([4, 3, 5])
        more = torch.randint(4, 40, (3, 2))
        stepped, _ = step_all(model, cache.select(keep), more)
        full = logits_of(model, expanded[keep], torch.cat([hyps[keep], more], 1))
        torch.testing.assert_close(stepped, full[:, 7:], atol=1e-5, rtol=1e-5)


def test_step_returns_last_layer_cross_attention() -> None:
    model = tiny()
    src, _ = random_batch(2, 5, 1, src_lengths=[5, 2])
    with torch.no_grad():
        cache = model.start_cache(model.encode(src, src_mask(src)), src_mask(src))
        logits, _, weights = model.step(torch.full((2,), BOS), cache, return_attention=True)
        _, _, none = model.step(torch.full((2,), BOS), cache)
    assert none is None and weights.shape == (2, 5) and logits.shape == (2, 40)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2))
    assert weights[1, 2:].abs().max().item() == 0.0


def test_step_under_bf16_autocast() -> None:
    model = tiny()
    src, _ = random_batch(2, 5, 1)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        cache = model.start_cache(model.encode(src, src_mask(src)), src_mask(src))
        for _ in range(3):
            logits, cache, weights = model.step(torch.full((2,), BOS), cache, return_attention=True)
    assert logits.dtype == torch.float32 and torch.isfinite(logits).all() and torch.isfinite(weights).all()


def test_bf16_autocast_training_step_matches_fp32() -> None:
    model = tiny(norm_first=True)
    src, tgt = random_batch(3, 6, 7, src_lengths=[6, 4, 2])

    def loss() -> torch.Tensor:
        logits = logits_of(model, src, tgt[:, :-1])
        return F.cross_entropy(logits.float().reshape(-1, 40), tgt[:, 1:].reshape(-1))

    reference = loss()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = loss()
    low.backward()
    assert abs(low.item() - reference.item()) < 0.05
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_output_projection_is_tied_and_gets_both_gradients() -> None:
    tied = tiny(tgt_vocab=40)
    assert tied.output.weight is tied.tgt_embed.weight
    untied = tiny(tgt_vocab=40, tie_output=False)
    assert untied.output.weight is not untied.tgt_embed.weight
    untied.load_state_dict(tied.state_dict())  # both keys hold the one shared matrix
    src, tgt = random_batch(2, 5, 6)
    for model in (tied, untied):
        logits_of(model, src, tgt).logsumexp(-1).sum().backward()
    torch.testing.assert_close(
        tied.tgt_embed.weight.grad, untied.tgt_embed.weight.grad + untied.output.weight.grad
    )
    before = tied.tgt_embed.weight.detach().clone()
    torch.optim.SGD(tied.parameters(), lr=0.1).step()
    assert not torch.equal(tied.tgt_embed.weight, before)
    assert torch.equal(tied.output.weight, tied.tgt_embed.weight)


def test_state_dict_round_trip_keeps_tying() -> None:
    model = tiny()
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    fresh = tiny(src_vocab=50, tgt_vocab=40)
    with torch.no_grad():
        fresh.tgt_embed.weight.zero_()
    fresh.load_state_dict(torch.load(buffer, weights_only=True))
    assert fresh.output.weight is fresh.tgt_embed.weight
    src, tgt = random_batch(2, 4, 3)
    torch.testing.assert_close(logits_of(fresh, src, tgt), logits_of(model, src, tgt))


def test_shared_embeddings_are_one_module() -> None:
    model = tiny(src_vocab=40, tgt_vocab=40, share_embeddings=True)
    assert model.src_embed is model.tgt_embed is not None
    assert count_parameters(model) == count_parameters(tiny(src_vocab=40, tgt_vocab=40)) - 40 * 32


def expected_parameters(
    d: int, ff: int, enc: int, dec: int, vs: int, vt: int, tied: bool, norm_first: bool
) -> int:
    attention = 4 * d * d + 4 * d  # fused in-projections (3 or 1+2 matrices) + output, with biases
    ffn = 2 * d * ff + ff + d
    norm = 2 * d
    layers = enc * (attention + ffn + 2 * norm) + dec * (2 * attention + ffn + 3 * norm)
    return layers + (vs + vt) * d + (0 if tied else vt * d) + (2 * norm if norm_first else 0)


@pytest.mark.parametrize(("tied", "norm_first"), [(True, False), (False, False), (True, True), (False, True)])
def test_parameter_count_formula(tied: bool, norm_first: bool) -> None:
    cfg = ModelConfig(
        d_model=512,
        n_heads=8,
        d_ff=2048,
        encoder_layers=6,
        decoder_layers=6,
        norm_first=norm_first,
        tie_output=tied,
    )
    with torch.device("meta"):  # no memory, no init cost
        model = build_model(cfg, 7000, 5500)
        reference = nn.Transformer(512, 8, 6, 6, 2048, batch_first=True)
    assert count_parameters(model) == expected_parameters(512, 2048, 6, 6, 7000, 5500, tied, norm_first)
    if norm_first:  # nn.Transformer always ends each stack with a LayerNorm
        extra = 7000 * 512 + 5500 * 512 * (1 if tied else 2)
        assert count_parameters(model) == count_parameters(reference) + extra


def test_embedding_init_scale() -> None:
    torch.manual_seed(0)
    model = build_model(ModelConfig(d_model=256, tie_output=False), 8000, 6000)
    for weight in (model.src_embed.weight, model.tgt_embed.weight, model.output.weight):
        assert abs(weight[1:].std().item() - 256**-0.5) < 0.02 * 256**-0.5
    assert model.src_embed.weight[PAD].abs().max().item() == 0.0
    assert model.tgt_embed.weight[PAD].abs().max().item() == 0.0


@pytest.mark.parametrize("norm_first", [False, True])
def test_initial_loss_is_about_log_vocab(norm_first: bool) -> None:
    torch.manual_seed(0)
    cfg = ModelConfig(
        d_model=64, n_heads=4, d_ff=128, encoder_layers=2, decoder_layers=2, norm_first=norm_first
    )
    model = build_model(cfg, 1000, 1000).eval()
    src = torch.randint(4, 1000, (8, 12))
    tgt = torch.randint(4, 1000, (8, 11))
    logits = logits_of(model, src, tgt[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, 1000), tgt[:, 1:].reshape(-1)).item()
    assert abs(loss - math.log(1000)) < 1.0, loss


def test_learns_to_reverse() -> None:
    torch.manual_seed(0)
    vocab, length, batch = 16, 8, 64
    cfg = ModelConfig(
        d_model=64, n_heads=4, d_ff=128, encoder_layers=2, decoder_layers=2, dropout=0.0, max_positions=32
    )
    model = build_model(cfg, vocab, vocab)
    steps = 250
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    # Warm-up then decay: a constant rate keeps spiking the loss and makes the result seed-dependent.
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=steps, pct_start=0.1)

    def sample() -> tuple[torch.Tensor, torch.Tensor]:
        src = torch.randint(4, vocab, (batch, length))
        bos, eos = torch.full((batch, 1), BOS), torch.full((batch, 1), EOS)
        return src, torch.cat([bos, src.flip(1), eos], 1)

    for _ in range(steps):
        src, tgt = sample()
        logits = logits_of(model, src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), tgt[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()

    model.eval()
    src, tgt = sample()
    with torch.no_grad():  # greedy decoding through the cache, on unseen sequences
        cache = model.start_cache(model.encode(src, src_mask(src)), src_mask(src))
        token, out = tgt[:, 0], []
        for _ in range(length + 1):
            logits, cache, _ = model.step(token, cache)
            token = logits.argmax(-1)
            out.append(token)
    accuracy = (torch.stack(out, 1) == tgt[:, 1:]).float().mean().item()
    assert accuracy > 0.99, accuracy


def test_build_model_wires_the_config() -> None:
    model = build_model(TINY, 50, 40)
    assert (model.src_vocab_size, model.tgt_vocab_size, model.max_positions) == (50, 40, 64)
    assert len(model.encoder) == TINY.encoder_layers and len(model.decoder) == TINY.decoder_layers
    assert model.output.weight is model.tgt_embed.weight and model.tgt_embed.embedding_dim == TINY.d_model


def test_token_dropout_changes_training_logits_only() -> None:
    model = tiny(src_token_dropout=0.5, tgt_token_dropout=0.5)
    src, tgt = random_batch(4, 9, 8)
    plain = tiny()
    torch.testing.assert_close(logits_of(model, src, tgt), logits_of(plain, src, tgt))  # eval: no dropout
    model.train()
    torch.manual_seed(0)
    assert not torch.allclose(logits_of(model, src, tgt), logits_of(plain.train(), src, tgt))
    assert model.src_token_dropout.unk_id == 1 and model.tgt_token_dropout.first_word_id == 4


# The options published checkpoints need (Hugging Face Marian: ``mt_cli.pretrained``).
MARIAN_OPTIONS = {
    "activation": "swish",
    "output_bias": True,
    "scale_embeddings": False,
    "share_embeddings": True,
}


@pytest.mark.parametrize(
    "options",
    [{name: value} for name, value in MARIAN_OPTIONS.items()] + [MARIAN_OPTIONS],
    ids=[*MARIAN_OPTIONS, "all"],
)
def test_cached_steps_equal_full_decode_with_published_model_options(options: dict[str, object]) -> None:
    model = tiny(src_vocab=40, tgt_vocab=40, **options)
    if model.output.bias is not None:
        with torch.no_grad():
            model.output.bias.normal_()  # zero at init: give the steps something to get wrong
    src, tgt = random_batch(3, 6, 7, src_lengths=[6, 4, 2])
    src = src % 40
    tgt[:, 0] = BOS_ID
    causal = torch.ones(7, 7, dtype=torch.bool).tril()[None, None]  # (1, 1, T, T)
    full = model(src, tgt, src_mask(src), causal)
    with torch.no_grad():
        memory = model.encode(src, src_mask(src))
        stepped, _ = step_all(model, model.start_cache(memory, src_mask(src)), tgt)
    torch.testing.assert_close(stepped, full, atol=1e-5, rtol=1e-5)


def test_published_model_options_change_what_they_say() -> None:
    src, tgt = random_batch(2, 5, 4)
    assert tiny(scale_embeddings=False).embed_scale == 1.0 and tiny().embed_scale == math.sqrt(32)
    biased = tiny(output_bias=True)
    assert (
        biased.output.bias is not None and not biased.output.bias.any() and biased.output.bias.requires_grad
    )
    with torch.no_grad():
        biased.output.bias[5] = 100.0
    assert (logits_of(biased, src, tgt).argmax(-1) == 5).all()
    x = torch.randn(4)
    swish = tiny(activation="swish").encoder[0].ffn.activation
    torch.testing.assert_close(swish(x), x * torch.sigmoid(x))


def test_default_models_keep_their_state_dict() -> None:
    """Every checkpoint mt saved before the published-model options must still load: the default
    model's parameters are these (one layer per stack), and only ``output_bias`` adds one."""
    cfg = dataclasses.replace(TINY, encoder_layers=1, decoder_layers=1)
    attention = ["out.weight", "out.bias"]
    norms = [f"norm{i}.{p}" for i in (1, 2, 3) for p in ("weight", "bias")]
    ffn = [f"ffn.linear{i}.{p}" for i in (1, 2) for p in ("weight", "bias")]
    expected = (
        ["tgt_embed.weight", "src_embed.weight"]
        + [f"encoder.0.self_attn.{n}" for n in [*attention, "qkv.weight", "qkv.bias"]]
        + [f"encoder.0.{n}" for n in ffn + norms[:4]]
        + [f"decoder.0.self_attn.{n}" for n in [*attention, "qkv.weight", "qkv.bias"]]
        + [f"decoder.0.cross_attn.{n}" for n in [*attention, "q.weight", "q.bias", "kv.weight", "kv.bias"]]
        + [f"decoder.0.{n}" for n in ffn + norms]
        + ["output.weight"]
    )
    assert list(build_model(cfg, 50, 40).state_dict()) == expected
    options = {k: v for k, v in MARIAN_OPTIONS.items() if k not in ("output_bias", "share_embeddings")}
    assert list(build_model(dataclasses.replace(cfg, **options), 50, 40).state_dict()) == expected
    biased = build_model(dataclasses.replace(cfg, output_bias=True), 50, 40).state_dict()
    assert list(biased) == [*expected, "output.bias"]


def test_a_large_batch_is_encoded_in_groups_cut_to_their_own_length() -> None:
    model = tiny()
    rows = ENCODE_ROWS + 9  # two groups: the shorter 64 sources, then the 9 longest
    torch.manual_seed(3)
    lengths = torch.randint(1, 25, (rows,)).tolist()
    lengths[5] = 30  # the longest: without groups every source would be padded to it
    src, _ = random_batch(rows, 30, 1, src_lengths=lengths)
    with torch.no_grad():
        memory = model.encode(src, src_mask(src))
        alone = [
            model.encode(src[i : i + 1, :n], src_mask(src[i : i + 1, :n]))[0] for i, n in enumerate(lengths)
        ]
        model.train()  # training encodes the batch as it is: padding included
        whole = model.encode(src, src_mask(src))
    assert memory.shape == (rows, 30, TINY.d_model)
    for n, mine, one in zip(lengths, memory, alone):
        torch.testing.assert_close(mine[:n], one, atol=1e-5, rtol=1e-5)
    shorter = torch.tensor(lengths).argsort(stable=True)[:ENCODE_ROWS]  # the first group: none past 24
    assert not memory[shorter, 24:].any()  # never computed: zero, and masked by every attention
    assert whole[shorter, 24:].abs().sum() > 0  # training computes the padding of the whole batch
