"""Importing Hugging Face Marian checkpoints (``mt_cli.pretrained``): a ``MarianMTModel`` built
locally with opus-mt-de-en's option values (width, depth and vocabulary cut for speed) gives mt's
own model the same logits, cached steps and greedy output; what mt cannot represent is refused in
one line; mt's own export comes back bit for bit."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from mt_cli.config.sections import ModelConfig
from mt_cli.errors import CheckpointError, ConfigError
from mt_cli.export.huggingface import marian_weights, residual_permutation
from mt_cli.model.transformer import Transformer, build_model
from mt_cli.pretrained.marian import MarianImport, convert_marian
from mt_cli.pretrained.marian_config import marian_spec
from mt_cli.pretrained.marian_vocab import marian_to_mt, mt_order
from mt_cli.specials import BOS_ID, EOS_ID, PAD_ID, UNK_ID

transformers = pytest.importorskip("transformers")

V = 61  # Marian's layout: </s> 0, <unk> 1, pieces, pad last
MARIAN_PAD, MARIAN_EOS, MARIAN_UNK = V - 1, 0, 1


def opus_mt_config(**changes: Any) -> dict[str, Any]:
    """Helsinki-NLP/opus-mt-de-en's config.json, sizes cut (512/6+6/8/2048/58101 there)."""
    config = {
        "model_type": "marian",
        "architectures": ["MarianMTModel"],
        "vocab_size": V,
        "decoder_vocab_size": V,
        "d_model": 32,
        "encoder_layers": 2,
        "decoder_layers": 3,  # unequal, so a layer mapped to the wrong stack shows
        "encoder_attention_heads": 4,
        "decoder_attention_heads": 4,
        "encoder_ffn_dim": 64,
        "decoder_ffn_dim": 64,
        "activation_function": "swish",
        "scale_embedding": True,
        "share_encoder_decoder_embeddings": True,
        "tie_word_embeddings": True,
        "max_position_embeddings": 512,
        "pad_token_id": MARIAN_PAD,
        "eos_token_id": MARIAN_EOS,
        "bos_token_id": 0,
        "decoder_start_token_id": MARIAN_PAD,
        "forced_eos_token_id": 0,
        "bad_words_ids": [[MARIAN_PAD]],
        "dropout": 0.1,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        "encoder_layerdrop": 0.0,
        "decoder_layerdrop": 0.0,
        "normalize_before": False,
        "normalize_embedding": False,
        "static_position_embeddings": True,
        "add_final_layer_norm": False,
        "add_bias_logits": False,
        "num_beams": 4,
        "max_length": 512,
    }
    return config | changes


@pytest.fixture(scope="module")
def marian() -> Any:
    return random_marian(opus_mt_config())


def random_marian(config: dict[str, Any]) -> Any:
    """A MarianMTModel whose every weight, bias, LayerNorm and logits bias is moved off its init
    (init_std 0.02 leaves a model that repeats one token whatever the source), so that a wrong
    mapping shows; the position tables are left alone: they are fixed sinusoids."""
    torch.manual_seed(0)
    known = {k: v for k, v in config.items() if k not in ("architectures", "model_type")}
    model = transformers.MarianMTModel(transformers.MarianConfig(**known)).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "embed_positions" in name:
                continue
            if parameter.dim() == 2:  # (out, in): twice the usual 1/sqrt(fan_in) scale
                parameter.normal_(std=2 * parameter.shape[1] ** -0.5)
            else:
                parameter.add_(torch.randn_like(parameter) * 0.1)
        model.final_logits_bias.normal_(std=0.1)
    return model


def marian_batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Sources (3, 9) ending in </s>, one padded; decoder inputs (3, 7) starting from pad (Marian ids)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(2, V - 1, (3, 9), generator=g)
    src[:, -1] = MARIAN_EOS
    src[1, 5] = MARIAN_EOS
    src[1, 6:] = MARIAN_PAD
    tgt = torch.randint(2, V - 1, (3, 7), generator=g)
    tgt[:, 0] = MARIAN_PAD
    return src, tgt


def mt_logits(model: Transformer, src: torch.Tensor, tgt: torch.Tensor, pad: int) -> torch.Tensor:
    causal = torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool).tril()
    return model(src, tgt, (src != pad)[:, None, None, :], causal[None, None])  # (B, T, V)


def marian_logits(marian: Any, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return marian(input_ids=src, attention_mask=(src != MARIAN_PAD).long(), decoder_input_ids=tgt).logits


@torch.no_grad()
def test_teacher_forced_logits_equal_transformers(marian: Any) -> None:
    imported = convert_marian(opus_mt_config(), marian.state_dict(), renumber=False)
    model = imported.build()
    src, tgt = marian_batch()
    expected = marian_logits(marian, src, tgt)  # (B, T, V)
    diff = (mt_logits(model, src, tgt, MARIAN_PAD) - expected).abs().max().item()
    assert diff < 1e-4, diff
    m = imported.model
    assert (m.activation, m.scale_embeddings, m.output_bias, m.share_embeddings, m.tie_output) == (
        "swish",
        True,
        True,
        True,
        True,
    )
    assert m.max_positions == 512 and not m.norm_first
    assert model.src_embed is model.tgt_embed and model.output.weight is model.tgt_embed.weight


@torch.no_grad()
def test_renumbered_vocabulary_gives_the_same_logits_in_mt_ids(marian: Any) -> None:
    imported = convert_marian(opus_mt_config(), marian.state_dict(), unk_id=MARIAN_UNK)
    order = imported.tgt_order
    assert order is not None and imported.src_vocab_size == imported.tgt_vocab_size == V + 1
    assert order[:4].tolist() == [MARIAN_PAD, MARIAN_UNK, MARIAN_PAD, MARIAN_EOS]  # pad, unk, <s>, </s>
    model = imported.build()
    to_mt = marian_to_mt(order)
    src, tgt = marian_batch()
    mt_src, mt_tgt = src.clone().apply_(to_mt.__getitem__), tgt.clone().apply_(to_mt.__getitem__)
    assert mt_tgt[0, 0] == PAD_ID and (mt_src[1, 6:] == PAD_ID).all() and mt_src[0, -1] == EOS_ID
    mt_tgt[:, 0] = BOS_ID  # <s>: Marian's start row, as pad is
    ours = mt_logits(model, mt_src, mt_tgt, PAD_ID)  # (B, T, V + 1)
    expected = marian_logits(marian, src, tgt)  # (B, T, V)
    columns = [to_mt[marian_id] for marian_id in range(V)]  # Marian's logit j is mt's to_mt[j]
    torch.testing.assert_close(ours[..., columns], expected, atol=1e-4, rtol=0)
    torch.testing.assert_close(ours[..., BOS_ID], ours[..., PAD_ID], atol=0, rtol=0)  # one logit twice
    torch.testing.assert_close(model.tgt_embed.weight[BOS_ID], model.tgt_embed.weight[PAD_ID], atol=0, rtol=0)


@torch.no_grad()
def test_greedy_output_equals_generate(marian: Any) -> None:
    """mt's cached steps from <s>, with pad and <s> never chosen (Marian's ``bad_words_ids``), pick
    what ``generate`` picks: what mt's search must add for imports is that ban."""
    imported = convert_marian(opus_mt_config(), marian.state_dict(), unk_id=MARIAN_UNK)
    model, order = imported.build(), imported.tgt_order
    assert order is not None
    to_mt = marian_to_mt(order)
    src, _ = marian_batch(seed=2)
    steps = 12
    expected = marian.generate(
        input_ids=src,
        attention_mask=(src != MARIAN_PAD).long(),
        generation_config=transformers.GenerationConfig(
            decoder_start_token_id=MARIAN_PAD,
            pad_token_id=MARIAN_PAD,
            eos_token_id=MARIAN_EOS,
            bad_words_ids=[[MARIAN_PAD]],
            num_beams=1,
            do_sample=False,
            max_new_tokens=steps,
        ),
    )[:, 1:]  # (B, <=steps) Marian ids, after the start symbol
    mt_src = src.clone().apply_(to_mt.__getitem__)
    src_mask = (mt_src != PAD_ID)[:, None, None, :]
    cache = model.start_cache(model.encode(mt_src, src_mask), src_mask)
    tokens = torch.full((src.shape[0],), BOS_ID)
    chosen = []
    for _ in range(steps):
        logits, cache, _ = model.step(tokens, cache)  # (B, V + 1)
        logits[:, [PAD_ID, BOS_ID]] = float("-inf")
        tokens = logits.argmax(-1)
        chosen.append(order[tokens])  # back to Marian ids
    ours = torch.stack(chosen, 1)  # (B, steps)
    assert len(set(expected.flatten().tolist())) >= 5  # not one token over and over
    # generate forces </s> at its last step (the config's forced_eos_token_id): compare before it.
    for row, reference in zip(ours.tolist(), expected[:, : steps - 1].tolist(), strict=True):
        end = reference.index(MARIAN_EOS) + 1 if MARIAN_EOS in reference else len(reference)
        assert row[:end] == reference[:end]


@torch.no_grad()
def test_cached_steps_equal_the_full_pass_with_marian_options(marian: Any) -> None:
    model = convert_marian(opus_mt_config(), marian.state_dict(), unk_id=MARIAN_UNK).build()
    src, tgt = torch.randint(4, V, (2, 8)), torch.randint(4, V, (2, 6))
    tgt[:, 0] = BOS_ID
    full = mt_logits(model, src, tgt, PAD_ID)  # (B, T, V + 1)
    src_mask = (src != PAD_ID)[:, None, None, :]
    cache = model.start_cache(model.encode(src, src_mask), src_mask)
    for t in range(tgt.shape[1]):
        logits, cache, _ = model.step(tgt[:, t], cache)  # (B, V + 1)
        torch.testing.assert_close(logits, full[:, t], atol=1e-5, rtol=1e-5)


def test_a_saved_checkpoint_with_one_name_per_tied_tensor_imports(marian: Any, tmp_path: Any) -> None:
    """save_pretrained keeps one name of the shared embedding; safetensors is what the hub serves."""
    from safetensors.torch import load_file

    marian.save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    assert "lm_head.weight" not in weights or "model.shared.weight" not in weights  # deduplicated
    model = convert_marian(opus_mt_config(), weights, renumber=False).build()
    src, tgt = marian_batch()
    with torch.no_grad():
        diff = (mt_logits(model, src, tgt, MARIAN_PAD) - marian_logits(marian, src, tgt)).abs().max()
    assert diff.item() < 1e-4


REFUSED = [
    ({"model_type": "bart"}, "model_type"),
    ({"normalize_before": True}, "normalize_before"),
    ({"normalize_embedding": True}, "normalize_embedding"),
    ({"layernorm_embedding": True}, "layernorm_embedding"),
    ({"static_position_embeddings": False}, "static_position_embeddings"),
    ({"add_final_layer_norm": True}, "add_final_layer_norm"),
    ({"add_bias_logits": True}, "add_bias_logits"),
    ({"activation_function": "gelu_new"}, "activation_function"),
    ({"decoder_attention_heads": 8}, "decoder_attention_heads"),
    ({"decoder_ffn_dim": 128}, "decoder_ffn_dim"),
    ({"encoder_layerdrop": 0.1}, "encoder_layerdrop"),
    ({"decoder_vocab_size": V + 5}, "decoder_vocab_size"),
    ({"eos_token_id": [0, 5]}, "eos_token_id"),
    ({"d_model": 30}, "n_heads"),  # mt's own rule: 30 is not divisible by 4 heads
]


@pytest.mark.parametrize(("changes", "named"), REFUSED, ids=[n for _, n in REFUSED])
def test_what_mt_cannot_represent_is_refused_in_one_line(changes: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError) as err:
        marian_spec(opus_mt_config(**changes))
    assert named in str(err.value) and "\n" not in str(err.value)


def test_what_mt_can_represent_is_read() -> None:
    """Separate vocabularies, an untied output, no embedding scale, relu; keys left out mean
    transformers' defaults (scale_embedding false, gelu)."""
    config = opus_mt_config(
        share_encoder_decoder_embeddings=False,
        decoder_vocab_size=V + 9,
        tie_word_embeddings=False,
        scale_embedding=False,
        activation_function="relu",
    )
    spec = marian_spec(config)
    assert (spec.src_vocab_size, spec.tgt_vocab_size) == (V, V + 9)
    assert not (spec.model.share_embeddings or spec.model.tie_output or spec.model.scale_embeddings)
    assert spec.model.activation == "relu" and spec.decoder_start_id == MARIAN_PAD
    bare = marian_spec(
        {"model_type": "marian", "d_model": 32, "encoder_attention_heads": 4, "decoder_attention_heads": 4}
    )
    assert (bare.model.activation, bare.model.scale_embeddings, bare.model.max_positions) == (
        "gelu",
        False,
        1024,
    )


def test_untied_separate_vocabularies_convert(marian: Any) -> None:
    config = opus_mt_config(share_encoder_decoder_embeddings=False, tie_word_embeddings=False)
    separate = random_marian(config)
    imported = convert_marian(config, separate.state_dict(), renumber=False)
    model = imported.build()
    assert model.src_embed is not model.tgt_embed and model.output.weight is not model.tgt_embed.weight
    src, tgt = marian_batch()
    diff = (mt_logits(model, src, tgt, MARIAN_PAD) - marian_logits(separate, src, tgt)).abs().max()
    assert diff.item() < 1e-4


def test_weights_that_do_not_fit_are_refused(marian: Any) -> None:
    weights = dict(marian.state_dict())
    missing = {k: v for k, v in weights.items() if k != "model.decoder.layers.2.fc1.weight"}
    with pytest.raises(CheckpointError, match="model.decoder.layers.2.fc1.weight"):
        convert_marian(opus_mt_config(), missing)
    with pytest.raises(CheckpointError, match="layernorm_embedding"):
        convert_marian(
            opus_mt_config(), weights | {"model.encoder.layernorm_embedding.weight": torch.ones(32)}
        )
    with pytest.raises(CheckpointError, match=r"is \[61, 32\] where config.json's sizes make it \[70, 32\]"):
        convert_marian(opus_mt_config(vocab_size=70, decoder_vocab_size=70, pad_token_id=69), weights)


def test_the_vocabulary_order_keeps_mt_layout_as_it_is() -> None:
    assert mt_order(10, pad=PAD_ID, unk=UNK_ID, eos=EOS_ID, start=BOS_ID).tolist() == list(range(10))
    order = mt_order(6, pad=5, unk=1, eos=0, start=5)
    assert order.tolist() == [5, 1, 5, 0, 2, 3, 4]
    assert marian_to_mt(order) == {5: PAD_ID, 1: UNK_ID, 0: EOS_ID, 2: 4, 3: 5, 4: 6}
    with pytest.raises(ConfigError, match="share ids"):
        mt_order(6, pad=0, unk=1, eos=0, start=0)


def mt_export_config(cfg: ModelConfig, src_vocab: int, tgt_vocab: int) -> dict[str, Any]:
    """The config.json ``export.huggingface.marian_config`` writes for such a model."""
    return opus_mt_config(
        vocab_size=src_vocab,
        decoder_vocab_size=tgt_vocab,
        share_encoder_decoder_embeddings=cfg.share_embeddings,
        tie_word_embeddings=cfg.tie_output,
        d_model=cfg.d_model,
        encoder_layers=cfg.encoder_layers,
        decoder_layers=cfg.decoder_layers,
        activation_function=cfg.activation,
        max_position_embeddings=cfg.max_positions,
        pad_token_id=PAD_ID,
        eos_token_id=EOS_ID,
        bos_token_id=BOS_ID,
        decoder_start_token_id=BOS_ID,
    )


@pytest.mark.parametrize("share", [False, True])
def test_mt_export_imports_back_bit_for_bit(share: bool) -> None:
    cfg = ModelConfig(
        d_model=32, n_heads=4, d_ff=64, encoder_layers=2, decoder_layers=3, share_embeddings=share
    )
    torch.manual_seed(0)
    model = build_model(cfg, 40, 40 if share else 30)
    exported = marian_weights(model, residual_permutation(cfg.d_model))
    imported: MarianImport = convert_marian(mt_export_config(cfg, 40, 40 if share else 30), exported)
    assert imported.model == cfg  # no bias (the export's is zero), mt's ids, <s> first
    assert imported.src_order is not None and imported.src_order.tolist() == list(range(40))
    original = model.state_dict()
    assert set(imported.state_dict) == set(original)
    for name, tensor in original.items():
        assert torch.equal(imported.state_dict[name], tensor), name
