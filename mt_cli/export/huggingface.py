"""``mt export --format huggingface``: a run's model as a Hugging Face ``MarianMTModel`` directory.

Written like CTranslate2's converters: one small mapping function per kind of layer, each giving
Marian's parameter names and tensors; the whole dict is loaded with ``strict=True`` into a
``MarianMTModel`` built from a ``MarianConfig`` and saved with ``save_pretrained`` (safetensors).
What makes the export decode exactly like mt (float32 greedy: token for token):

* Positions. Both models add sinusoids with the same frequencies, 10000 ** (-2j / D), but mt
  interleaves them (dim 2j sin, 2j + 1 cos) and Marian puts every sin in the first half and
  every cos in the second. Marian builds its table at load time and stores none, so it cannot
  be given mt's. Instead the export renumbers the model dimension: Marian's dim i is mt's dim
  ``perm[i]`` with ``perm = [0, 2, 4, ..., 1, 3, 5, ...]``, which turns mt's table into Marian's.
  A renumbering of the residual stream changes nothing as long as every weight that reads or
  writes that stream follows it: the embeddings and the output projection (columns), every
  LayerNorm (weight and bias; mean and variance do not depend on the order), the q/k/v and
  fc1 inputs (columns), the attention output and fc2 outputs (rows and bias). The attention
  heads' own dims (q/k/v outputs, out_proj inputs) are not the residual stream and stay as
  they are.
* mt's fused self-attention ``qkv`` (3D, D) and cross-attention ``kv`` (2D, D) are split into
  Marian's q/k/v projections; both lay out each part head by head, so the split is all it takes.
* Embeddings are scaled by sqrt(D) (``scale_embedding``), LayerNorms use PyTorch's eps 1e-5 in
  both, and ``final_logits_bias`` is mt's output bias (zero for a model without one).
* Ids: vocab.json/target_vocab.json map every SentencePiece piece to its own id, so Marian's
  ids are mt's (pad 0, unk 1, <s> 2, </s> 3). mt starts decoding with <s> (Marian: with pad),
  so ``decoder_start_token_id`` is 2; MarianTokenizer appends </s> to a source as mt does.
* Generation config: mt's card (beam size), ``forced_eos_token_id`` </s> (mt forces EOS at its
  length limit) and ``max_length`` the model's positions. mt's per-sentence limit,
  ``max_len_a * source length + max_len_b``, has no Marian equivalent: pass ``max_new_tokens``.

Post-norm only: Marian has no pre-norm variant, so a pre-norm run is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from mt_cli.config.recipe import config_to_dict
from mt_cli.disk.files import temporary_directory_next_to, write_json, writing
from mt_cli.disk.layout import ExportFiles
from mt_cli.errors import ConfigError, InputError, RunFailure
from mt_cli.export.marian_files import readme, save_tokenizer
from mt_cli.model.layers import CrossAttention, DecoderLayer, EncoderLayer, FeedForward, SelfAttention
from mt_cli.specials import BOS_ID, EOS_ID, PAD_ID

if TYPE_CHECKING:
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    from mt_cli.config.card import ModelCard
    from mt_cli.model.transformer import Transformer
    from mt_cli.trained import TrainedModel

Weights = dict[str, Tensor]  # Marian parameter name -> fp32 tensor


def export_huggingface(trained: TrainedModel, out_dir: Path) -> Path:
    """Write the trained model to ``out_dir`` (which must not exist) as a Marian model with
    its tokenizer files. Weights are exported as the model holds them, upcast to fp32 (as
    ``load_trained`` gives them: an exact export)."""
    from safetensors import SafetensorError

    if out_dir.exists():
        raise InputError(f"{out_dir} already exists; remove it or choose another --output")
    model = marian_model(trained)
    with writing(out_dir):
        out_dir.parent.mkdir(parents=True, exist_ok=True)
    with temporary_directory_next_to(out_dir) as staging:
        model_dir = staging / "model"
        try:
            model.save_pretrained(model_dir)  # config.json, generation_config.json, model.safetensors
        except SafetensorError as err:  # safetensors writes in Rust: a full disk is its error, not OSError
            raise RunFailure(f"cannot write {out_dir}: {err}; free some space or write elsewhere") from None
        save_tokenizer(trained, model_dir)
        write_json(config_to_dict(trained.card), model_dir / ExportFiles.CARD)  # for mt's own tools
        (model_dir / "README.md").write_text(readme(trained.card), encoding="utf-8")
        model_dir.rename(out_dir)
    return out_dir


def marian_model(trained: TrainedModel) -> MarianMTModel:
    """A ``MarianMTModel`` (eval mode) holding the trained model's weights."""
    from transformers import MarianMTModel

    card = trained.card
    if card.model.norm_first:
        raise ConfigError(
            "Hugging Face Marian is post-norm only; this run is pre-norm (model.norm_first: true)"
        )
    config = marian_config(card, trained.model)
    model = MarianMTModel(config)
    weights = marian_weights(trained.model, residual_permutation(card.model.d_model))
    # Marian rebuilds its position tables at load and never saves them: keep its own.
    own = model.state_dict()
    weights.update({name: own[name] for name in own if name.endswith("embed_positions.weight")})
    model.load_state_dict(weights, strict=True)
    model.generation_config = generation_config(card)
    return model.eval()


def residual_permutation(d_model: int) -> Tensor:
    """(D,) ``perm`` with Marian's residual dim i = mt's dim ``perm[i]``: mt's sin dims (even)
    first, then its cos dims (odd), the order of Marian's position table."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def marian_config(card: ModelCard, model: Transformer) -> MarianConfig:
    from transformers import MarianConfig

    cfg = card.model
    return MarianConfig(
        vocab_size=model.src_vocab_size,
        decoder_vocab_size=model.tgt_vocab_size,
        share_encoder_decoder_embeddings=cfg.share_embeddings,
        tie_word_embeddings=model.output.weight is model.tgt_embed.weight,
        max_position_embeddings=cfg.max_positions,
        d_model=cfg.d_model,
        encoder_layers=cfg.encoder_layers,
        decoder_layers=cfg.decoder_layers,
        encoder_attention_heads=cfg.n_heads,
        decoder_attention_heads=cfg.n_heads,
        encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff,
        activation_function=cfg.activation,
        # Training-only rates, carried over for fine-tuning; mt's token dropout has no equivalent.
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        activation_dropout=cfg.activation_dropout,
        scale_embedding=cfg.scale_embeddings,
        pad_token_id=PAD_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        decoder_start_token_id=BOS_ID,
        forced_eos_token_id=EOS_ID,
    )


def generation_config(card: ModelCard) -> GenerationConfig:
    from transformers import GenerationConfig

    return GenerationConfig(
        decoder_start_token_id=BOS_ID,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
        forced_eos_token_id=EOS_ID,
        num_beams=card.decode.beam_size,
        # mt stops a sentence once beam_size hypotheses have ended, and both divide a finished
        # hypothesis's log-probability by length ** alpha: the beams agree (tested).
        early_stopping=True,
        length_penalty=card.decode.length_penalty,
        max_length=card.model.max_positions,
    )


def marian_weights(model: Transformer, perm: Tensor) -> Weights:
    """Every Marian parameter but the position tables, from mt's model."""
    weights = embedding_weights(model, perm)
    for i, layer in enumerate(model.encoder):
        weights |= encoder_layer_weights(f"model.encoder.layers.{i}", layer, perm)
    for i, layer in enumerate(model.decoder):
        weights |= decoder_layer_weights(f"model.decoder.layers.{i}", layer, perm)
    return weights


def embedding_weights(model: Transformer, perm: Tensor) -> Weights:
    """Token embeddings, output projection and the (zero) logits bias; tied ones under each name."""
    src = _reads(model.src_embed.weight, perm)  # (V_src, D)
    tgt = src if model.tgt_embed is model.src_embed else _reads(model.tgt_embed.weight, perm)  # (V, D)
    output = tgt if model.output.weight is model.tgt_embed.weight else _reads(model.output.weight, perm)
    weights = {
        "model.encoder.embed_tokens.weight": src,
        "model.decoder.embed_tokens.weight": tgt,
        "lm_head.weight": output,  # (V, D)
        "final_logits_bias": (  # (1, V)
            torch.zeros(1, model.tgt_vocab_size)
            if model.output.bias is None
            else model.output.bias.detach().float().reshape(1, -1).clone()
        ),
    }
    if model.tgt_embed is model.src_embed:
        weights["model.shared.weight"] = src
    return weights


def encoder_layer_weights(prefix: str, layer: EncoderLayer, perm: Tensor) -> Weights:
    return (
        self_attention_weights(f"{prefix}.self_attn", layer.self_attn, perm)
        | layer_norm_weights(f"{prefix}.self_attn_layer_norm", layer.norm1, perm)
        | feed_forward_weights(prefix, layer.ffn, perm)
        | layer_norm_weights(f"{prefix}.final_layer_norm", layer.norm2, perm)
    )


def decoder_layer_weights(prefix: str, layer: DecoderLayer, perm: Tensor) -> Weights:
    return (
        self_attention_weights(f"{prefix}.self_attn", layer.self_attn, perm)
        | layer_norm_weights(f"{prefix}.self_attn_layer_norm", layer.norm1, perm)
        | cross_attention_weights(f"{prefix}.encoder_attn", layer.cross_attn, perm)
        | layer_norm_weights(f"{prefix}.encoder_attn_layer_norm", layer.norm2, perm)
        | feed_forward_weights(prefix, layer.ffn, perm)
        | layer_norm_weights(f"{prefix}.final_layer_norm", layer.norm3, perm)
    )


def self_attention_weights(prefix: str, attention: SelfAttention, perm: Tensor) -> Weights:
    weights = attention.qkv.weight.chunk(3)  # (3D, D) -> q, k, v each (D, D)
    biases = attention.qkv.bias.chunk(3)  # (3D,) -> each (D,)
    return _projections(prefix, weights, biases, perm) | _out_proj(prefix, attention, perm)


def cross_attention_weights(prefix: str, attention: CrossAttention, perm: Tensor) -> Weights:
    # The memory keys and values are read from is the encoder's residual stream, renumbered too.
    weights = (attention.q.weight, *attention.kv.weight.chunk(2))  # (D, D) each
    biases = (attention.q.bias, *attention.kv.bias.chunk(2))  # (D,) each
    return _projections(prefix, weights, biases, perm) | _out_proj(prefix, attention, perm)


def _projections(
    prefix: str, weights: tuple[Tensor, ...], biases: tuple[Tensor, ...], perm: Tensor
) -> Weights:
    """q, k, v: they read the residual stream (columns renumbered) and write head dims (rows and
    bias as they are)."""
    out: Weights = {}
    for name, weight, bias in zip("qkv", weights, biases, strict=True):
        out[f"{prefix}.{name}_proj.weight"] = _reads(weight, perm)  # (D, D)
        out[f"{prefix}.{name}_proj.bias"] = _fp32(bias)  # (D,)
    return out


def _out_proj(prefix: str, attention: nn.Module, perm: Tensor) -> Weights:
    """The output projection reads head dims and writes the residual stream (rows renumbered)."""
    return {
        f"{prefix}.out_proj.weight": _writes(attention.out.weight, perm),  # (D, D)
        f"{prefix}.out_proj.bias": _writes(attention.out.bias, perm),  # (D,)
    }


def feed_forward_weights(prefix: str, ffn: FeedForward, perm: Tensor) -> Weights:
    return {
        f"{prefix}.fc1.weight": _reads(ffn.linear1.weight, perm),  # (F, D)
        f"{prefix}.fc1.bias": _fp32(ffn.linear1.bias),  # (F,)
        f"{prefix}.fc2.weight": _writes(ffn.linear2.weight, perm),  # (D, F)
        f"{prefix}.fc2.bias": _writes(ffn.linear2.bias, perm),  # (D,)
    }


def layer_norm_weights(prefix: str, norm: nn.LayerNorm, perm: Tensor) -> Weights:
    return {f"{prefix}.weight": _writes(norm.weight, perm), f"{prefix}.bias": _writes(norm.bias, perm)}


def _reads(weight: Tensor, perm: Tensor) -> Tensor:
    """A matrix (out, D) applied to the residual stream, with its input columns renumbered."""
    return _fp32(weight)[:, perm]


def _writes(tensor: Tensor, perm: Tensor) -> Tensor:
    """A matrix (D, in) or vector (D,) whose output is the residual stream, rows renumbered."""
    return _fp32(tensor)[perm]


def _fp32(tensor: Tensor) -> Tensor:
    return tensor.detach().float().cpu().contiguous()
