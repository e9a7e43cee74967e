"""Import a Hugging Face Marian checkpoint (config.json + state dict) as mt's model.

``convert_marian`` runs the steps: ``marian_config`` reads the config (refusing what mt cannot
represent), ``marian_checks`` checks the weights against it (shapes, layers, finite floating-point
values), ``marian_vocab`` renumbers the vocabulary into mt's special ids, and ``marian_weights``
maps the tensors. The result builds an ordinary ``Transformer``: no wrapper
around transformers, which is needed only by whoever reads the files (safetensors or torch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from mt_cli.config.sections import ModelConfig
from mt_cli.model.transformer import Transformer, build_model
from mt_cli.pretrained.marian_checks import check_weights
from mt_cli.pretrained.marian_config import marian_spec
from mt_cli.pretrained.marian_vocab import mt_order
from mt_cli.pretrained.marian_weights import Weights, mt_state_dict


@dataclass(frozen=True)
class MarianImport:
    """A converted checkpoint: mt's model options, vocabulary sizes and state dict, and for each
    side the order (mt id -> Marian id, see ``marian_vocab``) its tokenizer must number pieces by;
    None where Marian's ids were kept."""

    model: ModelConfig
    src_vocab_size: int
    tgt_vocab_size: int
    state_dict: Weights
    src_order: Tensor | None
    tgt_order: Tensor | None

    def build(self) -> Transformer:
        """The model holding the weights, in eval mode (``strict``: every parameter is given)."""
        model = build_model(self.model, self.src_vocab_size, self.tgt_vocab_size)
        model.load_state_dict(self.state_dict, strict=True)
        return model.eval()


def convert_marian(
    config: Mapping[str, Any], weights: Mapping[str, Tensor], unk_id: int = 1, renumber: bool = True
) -> MarianImport:
    """mt's model for a Marian ``config`` (config.json) and its ``weights`` (state dict).

    ``unk_id`` is <unk>'s id in vocab.json (config.json does not say it; OPUS-MT: 1).
    ``renumber`` puts the vocabulary in mt's layout (what every other part of mt expects); without
    it the ids stay Marian's, which only a comparison with transformers wants. Renumbered, <s>
    holds Marian's decoder start row, so mt's model, which starts from <s>, feeds Marian's start vector.
    A ``ConfigError`` or ``CheckpointError`` (one line) for what cannot be imported.
    """
    spec = marian_spec(config)
    check_weights(weights, spec)
    model = spec.model
    bias = weights.get("final_logits_bias")  # transformers reads a missing one as zeros
    if bias is None or not bias.any():
        model = dataclasses.replace(model, output_bias=False)  # e.g. mt's own export: no bias to carry
    src_order = tgt_order = None
    src_size, tgt_size = spec.src_vocab_size, spec.tgt_vocab_size
    if renumber:
        ids = {"pad": spec.pad_id, "unk": unk_id, "eos": spec.eos_id, "start": spec.decoder_start_id}
        tgt_order = mt_order(spec.tgt_vocab_size, **ids)
        src_order = tgt_order if model.share_embeddings else mt_order(spec.src_vocab_size, **ids)
        src_size, tgt_size = len(src_order), len(tgt_order)
    spec = dataclasses.replace(spec, model=model)
    state = mt_state_dict(weights, spec, src_order, tgt_order)
    return MarianImport(model, src_size, tgt_size, state, src_order, tgt_order)
