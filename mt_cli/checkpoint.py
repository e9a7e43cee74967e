"""Checkpoints: atomic saves, safe loads, averaging (their names in a run: ``layout.RunDir``).

A checkpoint is data, never code: loads use ``torch.load(weights_only=True)``. Every write goes
to a temporary file in the same directory and is renamed into place, so a crash or Ctrl-C in
the middle of a save leaves the previous file intact.
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from mt_cli.config.card import ModelCard, card_from_config_dict, card_from_dict
from mt_cli.disk.files import atomic_write_bytes
from mt_cli.errors import CheckpointError, ConfigError


def save_checkpoint(payload: dict[str, Any], path: Path) -> None:
    atomic_write_bytes(path, lambda handle: torch.save(payload, handle))


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint as plain data; any damage becomes a one-line CheckpointError."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(
            f"checkpoint {path} does not exist; train a model with `mt train --config configs/multi30k.yaml`"
        )
    if path.is_dir():
        raise CheckpointError(f"checkpoint {path} is a directory; give a checkpoint file (.pt)")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except OSError as err:
        raise CheckpointError(f"cannot read checkpoint {path}: {err.strerror or err}") from None
    except (RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError, KeyError) as err:
        reason = _load_failure(err)
        raise CheckpointError(
            f"checkpoint {path} is damaged or truncated ({reason}); retrain or pick another"
        ) from None
    if not isinstance(payload, dict) or "model" not in payload or not {"card", "config"} & payload.keys():
        raise CheckpointError(f"checkpoint {path} is not an mt checkpoint (no model weights and card)")
    weights = payload["model"]
    if not isinstance(weights, dict) or not all(
        isinstance(name, str) and isinstance(value, torch.Tensor) for name, value in weights.items()
    ):
        raise CheckpointError(
            f"checkpoint {path} is not an mt checkpoint (its model entry is not a set of named weights)"
        )
    return payload


def _load_failure(err: Exception) -> str:
    """Why torch.load failed, in a few words: its weights-only refusal advises loading with
    ``weights_only=False``, which would run whatever code a file holds; mt never does."""
    text = str(err)
    if text.startswith("Weights only load failed"):
        detail = text.partition("WeightsUnpickler error:")[2].strip().splitlines()
        return f"not plain tensors and data: {detail[0]}" if detail else "not plain tensors and data"
    if isinstance(err, KeyError):  # the weights-only unpickler meets bytes that are no pickle
        return "not a PyTorch file"
    return text.splitlines()[0] if text else type(err).__name__


def checkpoint_card(payload: dict[str, Any], path: Path) -> ModelCard:
    """The model's card as saved with its weights (derived from the recipe in older checkpoints)."""
    try:
        if "card" in payload:
            return card_from_dict(payload["card"])
        return card_from_config_dict(payload["config"])
    except ConfigError as err:
        raise CheckpointError(
            f"checkpoint {path} describes its model in a way this version cannot read: {err}"
        ) from None


def average_checkpoints(paths: list[Path], output: Path) -> Path:
    """Write the parameter average of ``paths`` (same architecture) as a new checkpoint."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    payloads = [load_checkpoint(p) for p in paths]
    keys, architecture = payloads[0]["model"].keys(), checkpoint_card(payloads[0], paths[0]).model
    for path, payload in zip(paths, payloads):
        if payload["model"].keys() != keys or checkpoint_card(payload, path).model != architecture:
            raise CheckpointError(f"{path} has a different architecture from {paths[0]}; cannot average")
    average = {}
    for key in keys:
        tensors = [p["model"][key] for p in payloads]
        if tensors[0].is_floating_point():
            average[key] = torch.stack([t.float() for t in tensors]).mean(0).to(tensors[0].dtype)
        else:
            average[key] = tensors[-1]
    newest = payloads[-1]
    save_checkpoint(
        {
            "model": average,
            **{key: newest[key] for key in ("card", "config") if key in newest},
            "step": newest.get("step"),
            "averaged_from": [str(p) for p in paths],
        },
        output,
    )
    return output
