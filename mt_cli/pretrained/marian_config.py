"""A Hugging Face ``MarianConfig`` (a checkpoint's config.json, as a dict) in mt's terms.

Written like CTranslate2's converters: each small function below maps one aspect of the config
(sizes, rates, activation, embeddings, start symbol) and refuses, in one line naming the key, what
mt's model cannot represent, so a checkpoint is never imported wrong. Keys a config leaves out
mean what ``transformers.MarianConfig`` gives them (``_MARIAN_DEFAULTS``), since that is what
transformers would run. Several keys are BART leftovers that transformers' Marian code ignores
(``normalize_before``, ``static_position_embeddings``, ``add_final_layer_norm``, ...): OPUS-MT's
configs still carry them, with the values mt's post-norm model has; any other value means the
checkpoint came from a model neither transformers' Marian nor mt runs as written, so it is refused.

Ids stay Marian's here (OPUS-MT: </s> 0, <unk> 1, pad = vocabulary size - 1, no <s>);
``marian_vocab`` renumbers them into mt's layout.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mt_cli.config.rules import check_model
from mt_cli.config.sections import ModelConfig
from mt_cli.errors import ConfigError

# transformers' MarianConfig defaults (5.x, unchanged since 4.x) for the keys read here.
_MARIAN_DEFAULTS: dict[str, Any] = {
    "vocab_size": 58101,
    "decoder_vocab_size": None,  # None: vocab_size
    "max_position_embeddings": 1024,
    "encoder_layers": 12,
    "decoder_layers": 12,
    "encoder_ffn_dim": 4096,
    "decoder_ffn_dim": 4096,
    "encoder_attention_heads": 16,
    "decoder_attention_heads": 16,
    "encoder_layerdrop": 0.0,
    "decoder_layerdrop": 0.0,
    "activation_function": "gelu",
    "d_model": 1024,
    "dropout": 0.1,
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
    "scale_embedding": False,
    "pad_token_id": 58100,
    "eos_token_id": 0,
    "decoder_start_token_id": 58100,
    "share_encoder_decoder_embeddings": True,
    "tie_word_embeddings": True,
}

# Legacy keys with the value a model mt can represent, and what another value would mean.
_FIXED: dict[str, tuple[Any, str]] = {
    "normalize_before": (False, "pre-norm layers; transformers' Marian runs post-norm whatever it says"),
    "normalize_embedding": (False, "a LayerNorm on the embeddings, which mt's model does not have"),
    "layernorm_embedding": (False, "a LayerNorm on the embeddings, which mt's model does not have"),
    "static_position_embeddings": (True, "learned position embeddings; mt's positions are sinusoidal"),
    "add_final_layer_norm": (False, "a LayerNorm after the last post-norm layer, which mt does not have"),
    "add_bias_logits": (False, "a second bias on the logits besides final_logits_bias"),
}

Getter = Callable[[str], Any]  # a config key -> its value, or transformers' default

# Hugging Face's activation names -> mt's (``model.activation``); gelu is the exact (erf) one in both.
_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish", "silu": "swish"}


@dataclass(frozen=True)
class MarianSpec:
    """What a Marian config says: mt's model options and Marian's vocabulary sizes and special ids.

    ``model.output_bias`` is on: Marian always has ``final_logits_bias`` (``marian.convert_marian``
    turns it off when the weights hold an all-zero one, as mt's own export writes).
    """

    model: ModelConfig
    src_vocab_size: int  # rows of the encoder embedding
    tgt_vocab_size: int  # rows of the decoder embedding and of the logits
    pad_id: int
    eos_id: int
    decoder_start_id: int  # the first decoder input (OPUS-MT: the pad id)


def marian_spec(config: Mapping[str, Any]) -> MarianSpec:
    """The spec of a Marian config.json; a ``ConfigError`` (one line) for what mt cannot represent."""
    get = _reader(config)
    check_model_type(config)
    check_fixed_keys(config)
    check_no_layerdrop(get)
    src_vocab, tgt_vocab = vocabulary_sizes(get)
    model = ModelConfig(
        **sizes(get),
        **rates(get),
        activation=activation(get),
        norm_first=False,
        **embeddings(get, src_vocab, tgt_vocab),
        max_positions=count(get, "max_position_embeddings"),
        output_bias=True,
    )
    check_model(model)
    return MarianSpec(
        model,
        src_vocab,
        tgt_vocab,
        pad_id=count(get, "pad_token_id", minimum=0),
        eos_id=_one_id(get, "eos_token_id"),
        decoder_start_id=count(get, "decoder_start_token_id", minimum=0),
    )


def _reader(config: Mapping[str, Any]) -> Getter:
    def get(key: str) -> Any:
        return config[key] if key in config else _MARIAN_DEFAULTS[key]

    return get


def check_model_type(config: Mapping[str, Any]) -> None:
    kind = config.get("model_type", "marian")
    if kind != "marian":
        raise ConfigError(
            f"config.json describes a {kind!r} model (model_type); mt imports Marian (OPUS-MT) models only"
        )


def check_fixed_keys(config: Mapping[str, Any]) -> None:
    for key, (value, meaning) in _FIXED.items():
        if key in config and config[key] is not None and bool(config[key]) != value:
            raise ConfigError(f"cannot import {key}: {str(config[key]).lower()} ({meaning})")


def check_no_layerdrop(get: Getter) -> None:
    # Inference would be right, but fine-tuning would train a different model than the config says.
    for key in ("encoder_layerdrop", "decoder_layerdrop"):
        if get(key):
            raise ConfigError(
                f"cannot import {key}: {get(key)} (mt never skips layers in training); set it to 0"
            )


def sizes(get: Getter) -> dict[str, int]:
    """Widths and depths; mt has one head count and one FFN width for both stacks."""
    for encoder_key, decoder_key in (
        ("encoder_attention_heads", "decoder_attention_heads"),
        ("encoder_ffn_dim", "decoder_ffn_dim"),
    ):
        if get(encoder_key) != get(decoder_key):
            raise ConfigError(
                f"cannot import {encoder_key}={get(encoder_key)} with {decoder_key}={get(decoder_key)}: "
                "mt's encoder and decoder have the same width"
            )
    return {
        "d_model": count(get, "d_model"),
        "n_heads": count(get, "encoder_attention_heads"),
        "d_ff": count(get, "encoder_ffn_dim"),
        "encoder_layers": count(get, "encoder_layers"),
        "decoder_layers": count(get, "decoder_layers"),
    }


def rates(get: Getter) -> dict[str, float]:
    """The dropout rates, for fine-tuning (inference ignores them)."""
    return {name: number(get, name) for name in ("dropout", "attention_dropout", "activation_dropout")}


def activation(get: Getter) -> str:
    name = get("activation_function")
    if name not in _ACTIVATIONS:
        raise ConfigError(
            f"cannot import activation_function={name!r}: mt has {', '.join(sorted(_ACTIVATIONS))}"
        )
    return _ACTIVATIONS[name]


def vocabulary_sizes(get: Getter) -> tuple[int, int]:
    """(encoder, decoder) vocabulary sizes; a shared embedding uses vocab_size for both (as transformers)."""
    src = count(get, "vocab_size")
    if flag(get, "share_encoder_decoder_embeddings") or get("decoder_vocab_size") is None:
        return src, src
    return src, count(get, "decoder_vocab_size")


def embeddings(get: Getter, src_vocab: int, tgt_vocab: int) -> dict[str, bool]:
    """One table for both sides (OPUS-MT's shared vocabulary) or two; the output tied to the
    target table or not; scaled by sqrt(d_model) or not. mt represents every combination."""
    shared = flag(get, "share_encoder_decoder_embeddings")
    if shared and get("decoder_vocab_size") not in (None, src_vocab):
        raise ConfigError(
            f"cannot import share_encoder_decoder_embeddings: true with decoder_vocab_size="
            f"{get('decoder_vocab_size')} != vocab_size={src_vocab}: one shared table has one size"
        )
    return {
        "share_embeddings": shared,
        "tie_output": flag(get, "tie_word_embeddings"),
        "scale_embeddings": flag(get, "scale_embedding"),
    }


def _one_id(get: Getter, key: str) -> int:
    value = get(key)
    if isinstance(value, list):  # transformers allows several end ids; mt ends on one
        if len(value) != 1:
            raise ConfigError(f"cannot import {key}={value}: mt ends a sentence on one id")
        value = value[0]
    return _integer(value, key, minimum=0)


def count(get: Getter, key: str, minimum: int = 1, file: str = "config.json") -> int:
    """An integer key of ``file`` (a size, an id, a beam), at least ``minimum``; a ConfigError
    naming it otherwise (null, text, a fraction, true)."""
    return _integer(get(key), key, minimum, file)


def _integer(value: Any, key: str, minimum: int, file: str = "config.json") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(
            f"cannot import {file}'s {key}: {json.dumps(value)} (an integer of at least {minimum} is needed)"
        )
    return value


def number(get: Getter, key: str, file: str = "config.json") -> float:
    """A number key of ``file`` (a rate, a penalty); a ConfigError naming it for anything else."""
    value = get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"cannot import {file}'s {key}: {json.dumps(value)} (a number is needed)")
    return float(value)


def flag(get: Getter, key: str) -> bool:
    """A true/false key; a ConfigError naming it for anything else ("false" as text is not false)."""
    value = get(key)
    if not isinstance(value, bool):
        raise ConfigError(f"cannot import config.json's {key}: {json.dumps(value)} (true or false is needed)")
    return value
