"""``mt export --format ctranslate2``: a run's model as a CTranslate2 ``TransformerSpec``.

Written like CTranslate2's own converters: a ``Converter`` whose ``_load`` fills a spec, one
small mapping function per kind of layer. What makes the export decode exactly like mt:

* Post-norm is said explicitly (``TransformerSpec.from_config`` defaults to pre-norm).
* Positions: CTranslate2's built-in sinusoids differ from mt's (frequencies, layout), so mt's
  own table is stored, extended to at least ``POSITIONS`` rows by the same formula: clients that
  do not cap the output length (Argos stops at CTranslate2's default of 256 tokens) never read
  past it. mt's engine caps output at the model's own positions.
* mt's fused self-attention q/k/v and cross-attention k/v are CTranslate2's fused linears as
  they are; the tied output projection is the target embedding array, which CTranslate2 stores
  once.
* The config sets the LayerNorm epsilon (PyTorch's 1e-5) and ``add_source_eos``: mt appends EOS
  to every source and the export's other clients (Argos, LibreTranslate) will not.

Beside CTranslate2's files the directory holds the two SentencePiece models (``source.spm``,
``target.spm``) and ``mt.json`` (languages and the card's decoding), so the export is a
complete model: ``decode.ctranslate2.CTranslate2Engine`` opens it without the run.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from torch import nn

from mt_cli.config.recipe import config_to_dict
from mt_cli.disk.files import temporary_directory_next_to, write_json
from mt_cli.disk.layout import ExportFiles
from mt_cli.errors import ConfigError, InputError
from mt_cli.export.quantization import Quantization
from mt_cli.model.layers import (
    CrossAttention,
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    PositionalEncoding,
    SelfAttention,
)

if TYPE_CHECKING:
    from ctranslate2.specs import TransformerSpec

    from mt_cli.model.transformer import Transformer
    from mt_cli.text.pieces import Tokenizer
    from mt_cli.trained import TrainedModel

POSITIONS = 1024  # rows of the stored position table (CTranslate2 decodes 256 tokens by default)
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default, which every mt LayerNorm uses


def export_ctranslate2(trained: TrainedModel, out_dir: Path, quantization: Quantization) -> Path:
    """Write the trained model to ``out_dir`` (which must not exist) as a CTranslate2 model."""
    from ctranslate2.converters import Converter

    if out_dir.exists():
        raise InputError(f"{out_dir} already exists; remove it or choose another --output")

    class _MtConverter(Converter):
        def _load(self) -> TransformerSpec:
            return transformer_spec(trained)

    with temporary_directory_next_to(out_dir) as staging:
        model_dir = staging / "model"
        _MtConverter().convert(str(model_dir), quantization=quantization.value)
        write_model_files(trained, model_dir)
        model_dir.rename(out_dir)
    return out_dir


def transformer_spec(trained: TrainedModel) -> TransformerSpec:
    """The filled ``TransformerSpec`` of the trained model (fp32 weights)."""
    from ctranslate2.specs import TransformerSpec, common_spec

    model, card = trained.model, trained.card
    activations = {
        "relu": common_spec.Activation.RELU,
        "gelu": common_spec.Activation.GELU,
        "swish": common_spec.Activation.SWISH,
    }
    if card.model.activation not in activations:
        raise ConfigError(
            f"CTranslate2 export supports {', '.join(activations)}, not {card.model.activation!r}"
        )
    activation = activations[card.model.activation]
    spec = TransformerSpec.from_config(
        (len(model.encoder), len(model.decoder)),
        card.model.n_heads,
        pre_norm=card.model.norm_first,
        activation=activation,
    )
    rows = max(POSITIONS, card.model.max_positions)
    positions = _array(PositionalEncoding(card.model.d_model, rows).pe)  # (rows, D), mt's first rows
    set_encoder(spec.encoder, model, positions)
    set_decoder(spec.decoder, model, positions)
    spec.config.layer_norm_epsilon = LAYER_NORM_EPSILON
    spec.config.add_source_eos = True
    spec.register_source_vocabulary(trained.src_tok.vocabulary())
    spec.register_target_vocabulary(trained.tgt_tok.vocabulary())
    return spec


def set_encoder(spec, model: Transformer, positions: np.ndarray) -> None:
    set_input(spec, positions, model.embed_scale != 1.0)
    spec.embeddings[0].weight = _array(model.src_embed.weight)
    for layer_spec, layer in zip(spec.layer, model.encoder, strict=True):
        set_encoder_layer(layer_spec, layer)
    if isinstance(model.encoder_norm, nn.LayerNorm):
        set_layer_norm(spec.layer_norm, model.encoder_norm)


def set_decoder(spec, model: Transformer, positions: np.ndarray) -> None:
    set_input(spec, positions, model.embed_scale != 1.0)
    spec.embeddings.weight = _array(model.tgt_embed.weight)
    # Tied: the same array object, which CTranslate2's optimize() aliases and stores once.
    spec.projection.weight = (
        spec.embeddings.weight
        if model.output.weight is model.tgt_embed.weight
        else _array(model.output.weight)
    )
    if model.output.bias is not None:  # Marian's final_logits_bias
        spec.projection.bias = _array(model.output.bias)
    for layer_spec, layer in zip(spec.layer, model.decoder, strict=True):
        set_decoder_layer(layer_spec, layer)
    if isinstance(model.decoder_norm, nn.LayerNorm):
        set_layer_norm(spec.layer_norm, model.decoder_norm)


def set_input(spec, positions: np.ndarray, scaled: bool) -> None:
    spec.scale_embeddings = scaled  # by sqrt(d_model), as mt does unless model.scale_embeddings is off
    spec.position_encodings.encodings = positions


def set_encoder_layer(spec, layer: EncoderLayer) -> None:
    set_self_attention(spec.self_attention, layer.self_attn)
    set_layer_norm(spec.self_attention.layer_norm, layer.norm1)
    set_feed_forward(spec.ffn, layer.ffn)
    set_layer_norm(spec.ffn.layer_norm, layer.norm2)


def set_decoder_layer(spec, layer: DecoderLayer) -> None:
    set_self_attention(spec.self_attention, layer.self_attn)
    set_layer_norm(spec.self_attention.layer_norm, layer.norm1)
    set_cross_attention(spec.attention, layer.cross_attn)
    set_layer_norm(spec.attention.layer_norm, layer.norm2)
    set_feed_forward(spec.ffn, layer.ffn)
    set_layer_norm(spec.ffn.layer_norm, layer.norm3)


def set_self_attention(spec, attention: SelfAttention) -> None:
    set_linear(spec.linear[0], attention.qkv)  # (3D, D): q, k, v stacked, CTranslate2's fused layout
    set_linear(spec.linear[1], attention.out)


def set_cross_attention(spec, attention: CrossAttention) -> None:
    set_linear(spec.linear[0], attention.q)
    set_linear(spec.linear[1], attention.kv)  # (2D, D): k, v stacked
    set_linear(spec.linear[2], attention.out)


def set_feed_forward(spec, ffn: FeedForward) -> None:
    set_linear(spec.linear_0, ffn.linear1)
    set_linear(spec.linear_1, ffn.linear2)


def set_layer_norm(spec, norm: nn.LayerNorm) -> None:
    spec.gamma = _array(norm.weight)
    spec.beta = _array(norm.bias)


def set_linear(spec, linear: nn.Linear) -> None:
    spec.weight = _array(linear.weight)
    if linear.bias is not None:
        spec.bias = _array(linear.bias)


def _array(tensor) -> np.ndarray:
    # A copy: CTranslate2's optimize() quantizes the spec's arrays in place, and a view would
    # quantize the trained model's own weights with them.
    return tensor.detach().float().cpu().numpy().copy()


def write_model_files(trained: TrainedModel, model_dir: Path) -> None:
    """mt's files beside CTranslate2's: the two SentencePiece models (with the vocabularies that
    number an imported model's pieces) and the card naming them."""
    card = dataclasses.replace(
        trained.card,
        src_tokenizer=ExportFiles.SOURCE_SPM,
        tgt_tokenizer=ExportFiles.TARGET_SPM,
        src_vocabulary=_write_tokenizer(
            trained.src_tok, model_dir, ExportFiles.SOURCE_SPM, ExportFiles.SOURCE_VOCABULARY
        ),
        tgt_vocabulary=_write_tokenizer(
            trained.tgt_tok, model_dir, ExportFiles.TARGET_SPM, ExportFiles.TARGET_VOCABULARY
        ),
    )
    write_json(config_to_dict(card), model_dir / ExportFiles.CARD)


def _write_tokenizer(tokenizer: Tokenizer, model_dir: Path, model: str, vocabulary: str) -> str | None:
    """Write the SentencePiece model as ``model`` and its numbering (if any) as ``vocabulary``;
    the vocabulary's name when there is one."""
    (model_dir / model).write_bytes(tokenizer.model_bytes())
    numbering = tokenizer.numbering()
    if numbering is None:
        return None
    (model_dir / vocabulary).write_bytes(numbering)
    return vocabulary
