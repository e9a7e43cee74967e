"""Shrink and fine-tune (Shleifer and Rush 2020, "Pre-trained summarization distillation", who
shrank Marian and BART this way): a warm start whose model has fewer encoder or decoder layers
than its parent begins from a spread of the parent's layers, the first and the last kept and the
others evenly between; every other weight (embeddings, norms, the output projection) is the
parent's. A student made so starts close to its teacher, which a student trained from random
weights reaches only after many more updates; a shallow decoder is where the decoding time goes
(Kasai et al. 2021, "Deep encoder, shallow decoder").
"""

from __future__ import annotations

import re

from torch import Tensor

from mt_cli.config.sections import ModelConfig
from mt_cli.errors import CheckpointError

# The layer stacks a child may shrink: model key with its depth -> the state-dict prefix of a layer.
STACKS = {"encoder_layers": "encoder", "decoder_layers": "decoder"}


def layers_to_copy(parent: int, child: int) -> list[int]:
    """The parent's layers (of ``parent``) that the child's ``child`` layers start from, in order."""
    if child == 1:
        return [0]  # one layer: the one that reads the embeddings
    return [round(i * (parent - 1) / (child - 1)) for i in range(child)]


def shrink_plan(ours: ModelConfig, theirs: ModelConfig, name: str) -> dict[str, list[int]]:
    """For each stack the child makes shallower than its parent (``name``), the parent layers it
    keeps; empty where the depths are the parent's. A deeper child has layers nothing can fill."""
    plan = {}
    for key, stack in STACKS.items():
        mine, parents = getattr(ours, key), getattr(theirs, key)
        if mine > parents:
            raise CheckpointError(
                f"train.init_from: model.{key}={mine}, but {name} has {parents}; a warm start may keep "
                f"fewer of the parent's layers, not add layers: set model.{key} to at most {parents}"
            )
        if mine < parents:
            plan[stack] = layers_to_copy(parents, mine)
    return plan


def shrink(weights: dict[str, Tensor], plan: dict[str, list[int]]) -> dict[str, Tensor]:
    """``weights`` with each planned stack's kept layers renumbered from 0 and the others dropped."""
    kept: dict[str, Tensor] = {}
    for key, tensor in weights.items():
        match = re.fullmatch(r"(encoder|decoder)\.(\d+)\.(.+)", key)
        if match is None or match[1] not in plan:
            kept[key] = tensor
            continue
        stack, layer, rest = match[1], int(match[2]), match[3]
        if layer in plan[stack]:
            kept[f"{stack}.{plan[stack].index(layer)}.{rest}"] = tensor
    return kept


def describe(plan: dict[str, list[int]]) -> str:
    """``decoder from the parent's layer 0`` and the like, for the log; empty without a plan."""
    return "; ".join(
        f"{stack} from the parent's layer{'s' if len(kept) > 1 else ''} {', '.join(map(str, kept))}"
        for stack, kept in plan.items()
    )
