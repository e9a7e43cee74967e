"""A Marian state dict checked against its config.json before any tensor is mapped (``marian_weights``).

The layers config.json counts are the layers the file holds; every tensor mt takes has the shape
the config's sizes give it (a vocabulary of V, a width D, a feed-forward F), is floating point and
holds no NaN or infinity. Each fault is one line (a ``CheckpointError``) naming the tensor, before
anything is allocated from the config's sizes: a file whose weights do not fit its config, or that
is damaged, is refused rather than imported into a run that cannot translate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch
from torch import Tensor

from mt_cli.errors import CheckpointError
from mt_cli.pretrained.marian_config import MarianSpec

Shape = tuple[int, ...]

_FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
_ATTENTION = ("q_proj", "k_proj", "v_proj", "out_proj")


def check_weights(weights: Mapping[str, Tensor], spec: MarianSpec) -> None:
    """Refuse (one line) weights that do not fit ``spec`` or that hold values no model has."""
    check_layers(weights, spec)
    for name, shape in marian_shapes(spec).items():
        if name in weights:
            check_tensor(name, weights[name], shape)


def check_layers(weights: Mapping[str, Tensor], spec: MarianSpec) -> None:
    """The file holds layers 0 .. N-1 of each stack, N as config.json says."""
    for stack, key, layers in (
        ("encoder", "encoder_layers", spec.model.encoder_layers),
        ("decoder", "decoder_layers", spec.model.decoder_layers),
    ):
        pattern = re.compile(rf"model\.{stack}\.layers\.(\d+)\.")
        found = {int(match[1]) for name in weights if (match := pattern.match(name)) is not None}
        if len(found) != layers or max(found, default=-1) != layers - 1:  # 0 .. layers-1, each once
            raise CheckpointError(
                f"config.json's {key} is {layers} but the Marian weights hold {len(found)} {stack} layers; "
                "the weights and config.json do not belong together"
            )


def check_tensor(name: str, tensor: Tensor, shape: Shape) -> None:
    """``tensor`` has ``shape``, a floating-point type and finite values."""
    if tuple(tensor.shape) != shape:
        raise CheckpointError(
            f"the Marian weights' {name} is {list(tensor.shape)} where config.json's sizes make it "
            f"{list(shape)}; the weights and config.json do not belong together"
        )
    if tensor.dtype not in _FLOATS:
        raise CheckpointError(
            f"the Marian weights' {name} holds {str(tensor.dtype).removeprefix('torch.')} values; "
            "a model's weights are floating point (float32, float16 or bfloat16)"
        )
    bad = int((~torch.isfinite(tensor)).sum())
    if bad:
        raise CheckpointError(
            f"the Marian weights' {name} holds {bad} NaN or infinite values (of {tensor.numel()}): the file "
            "is damaged or the model diverged, and it cannot translate; import an intact copy"
        )


def marian_shapes(spec: MarianSpec) -> dict[str, Shape]:
    """The shape of each tensor mt takes from a Marian checkpoint of ``spec``, by its name there
    (position tables aside: neither model keeps them as weights)."""
    m = spec.model
    d, vocabulary = m.d_model, (spec.src_vocab_size, spec.tgt_vocab_size)
    shapes: dict[str, Shape] = {
        "model.shared.weight": (vocabulary[0], d),
        "model.encoder.embed_tokens.weight": (vocabulary[0], d),
        "model.decoder.embed_tokens.weight": (vocabulary[1], d),
        "lm_head.weight": (vocabulary[1], d),
        "final_logits_bias": (1, vocabulary[1]),
    }
    for stack, layers, parts in (
        ("encoder", m.encoder_layers, ("self_attn",)),
        ("decoder", m.decoder_layers, ("self_attn", "encoder_attn")),
    ):
        for i in range(layers):
            shapes |= _layer_shapes(f"model.{stack}.layers.{i}", parts, d, m.d_ff)
    return shapes


def _layer_shapes(prefix: str, attentions: tuple[str, ...], d: int, ff: int) -> dict[str, Shape]:
    shapes: dict[str, Shape] = {
        f"{prefix}.fc1.weight": (ff, d),
        f"{prefix}.fc1.bias": (ff,),
        f"{prefix}.fc2.weight": (d, ff),
        f"{prefix}.fc2.bias": (d,),
    }
    for norm in (*(f"{part}_layer_norm" for part in attentions), "final_layer_norm"):
        shapes |= {f"{prefix}.{norm}.weight": (d,), f"{prefix}.{norm}.bias": (d,)}
    for part in attentions:
        for projection in _ATTENTION:
            shapes |= {
                f"{prefix}.{part}.{projection}.weight": (d, d),
                f"{prefix}.{part}.{projection}.bias": (d,),
            }
    return shapes
