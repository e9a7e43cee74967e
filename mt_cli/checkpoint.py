"""Checkpoints: one typed payload (``Checkpoint``), atomic saves, safe loads, averaging (their
names in a run: ``layout.RunDir``).

A checkpoint is data, never code: loads use ``torch.load(weights_only=True)``. Every write goes
to a temporary file in the same directory and is renamed into place, so a crash or Ctrl-C in
the middle of a save leaves the previous file intact. The file holds a plain dict (what
``Checkpoint.as_dict`` gives), so that checkpoints stay loadable without this class.
"""

from __future__ import annotations

import pickle
import zipfile
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from mt_cli.config.card import ModelCard, card_from_config_dict, card_from_dict
from mt_cli.config.recipe import config_to_dict
from mt_cli.disk.files import atomic_write_bytes
from mt_cli.errors import CheckpointError, ConfigError

# What torch.load raises for a file that is damaged or not a weights-only PyTorch file.
# IndexError: torch's weights-only unpickler on some random bytes ("pop from empty list").
_LOAD_ERRORS = (
    RuntimeError,
    EOFError,
    pickle.UnpicklingError,
    zipfile.BadZipFile,
    ValueError,
    KeyError,
    IndexError,
)
# The entries that are dicts of state when present (anything else under those keys is ignored).
_STATE = ("config", "optimizer", "scaler", "progress", "rng")


@dataclass
class Checkpoint:
    """What a checkpoint file holds. Every one has the weights and the model's card; what `mt
    train` writes has the recipe and the update; ``last.pt`` alone has the training state
    (optimizer, scaler, progress, RNG) that a resume needs; an average names its sources."""

    model: dict[str, Tensor]
    card: ModelCard
    config: dict[str, Any] | None = None  # the training recipe as written (never parsed for inference)
    step: int | None = None
    optimizer: dict[str, Any] | None = None
    scaler: dict[str, Any] | None = None
    progress: dict[str, Any] | None = None
    rng: dict[str, Any] | None = None
    averaged_from: list[str] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The plain dict saved to disk: the card as data, absent entries left out."""
        payload: dict[str, Any] = {"model": self.model, "card": config_to_dict(self.card)}
        for f in fields(self)[2:]:
            value = getattr(self, f.name)
            if value is not None:
                payload[f.name] = value
        return payload

    def training_state(
        self, path: Path
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(optimizer, scaler, progress, rng) for a resume; a CheckpointError names the first missing."""
        state = (self.optimizer, self.scaler, self.progress, self.rng)
        for name, value in zip(("optimizer", "scaler", "progress", "rng"), state):
            if value is None:
                raise CheckpointError(f"{path} has no {name} state; it cannot be resumed")
        optimizer, scaler, progress, rng = state
        assert optimizer is not None and scaler is not None and progress is not None and rng is not None
        return optimizer, scaler, progress, rng

    def save(self, path: Path) -> None:
        atomic_write_bytes(path, lambda handle: torch.save(self.as_dict(), handle))

    @classmethod
    def load(cls, path: Path, map_location: str | torch.device = "cpu") -> Checkpoint:
        """Load a checkpoint as plain data; any damage becomes a one-line CheckpointError."""
        path = Path(path)
        if not path.exists():
            raise CheckpointError(
                f"checkpoint {path} does not exist; "
                "train a model with `mt train --config configs/multi30k.yaml`"
            )
        if path.is_dir():
            raise CheckpointError(f"checkpoint {path} is a directory; give a checkpoint file (.pt)")
        try:
            payload = torch.load(path, map_location=map_location, weights_only=True)
        except OSError as err:
            raise CheckpointError(f"cannot read checkpoint {path}: {err.strerror or err}") from None
        except _LOAD_ERRORS as err:
            reason = _load_failure(err)
            raise CheckpointError(
                f"checkpoint {path} is damaged or truncated ({reason}); retrain or pick another"
            ) from None
        return cls.from_dict(payload, path)

    @classmethod
    def from_dict(cls, payload: object, path: Path) -> Checkpoint:
        """The checkpoint a loaded file holds (``path`` names it in messages)."""
        if not isinstance(payload, dict) or "model" not in payload or not {"card", "config"} & payload.keys():
            raise CheckpointError(f"checkpoint {path} is not an mt checkpoint (no model weights and card)")
        weights = payload["model"]
        if not isinstance(weights, dict) or not all(
            isinstance(name, str) and isinstance(value, Tensor) for name, value in weights.items()
        ):
            raise CheckpointError(
                f"checkpoint {path} is not an mt checkpoint (its model entry is not a set of named weights)"
            )
        state = {key: payload[key] for key in _STATE if isinstance(payload.get(key), dict)}
        step = payload.get("step")
        averaged = payload.get("averaged_from")
        return cls(
            weights,
            _card(payload, path),
            step=step if isinstance(step, int) else None,
            averaged_from=list(averaged) if isinstance(averaged, list) else None,
            **state,
        )


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


def _card(payload: dict[str, Any], path: Path) -> ModelCard:
    """The model's card as saved with its weights (derived from the recipe in older checkpoints)."""
    try:
        if isinstance(payload.get("card"), dict):
            return card_from_dict(payload["card"])
        if isinstance(payload.get("config"), dict):
            return card_from_config_dict(payload["config"])
    except ConfigError as err:
        raise CheckpointError(
            f"checkpoint {path} describes its model in a way this version cannot read: {err}"
        ) from None
    raise CheckpointError(f"checkpoint {path} is not an mt checkpoint (no model weights and card)")


def average_checkpoints(paths: list[Path], output: Path) -> Path:
    """Write the parameter average of ``paths`` (same architecture) as a new checkpoint."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    loaded = [Checkpoint.load(p) for p in paths]
    keys, architecture = loaded[0].model.keys(), loaded[0].card.model
    for path, checkpoint in zip(paths, loaded):
        if checkpoint.model.keys() != keys or checkpoint.card.model != architecture:
            raise CheckpointError(f"{path} has a different architecture from {paths[0]}; cannot average")
    average = {}
    for key in keys:
        tensors = [c.model[key] for c in loaded]
        if tensors[0].is_floating_point():
            average[key] = torch.stack([t.float() for t in tensors]).mean(0).to(tensors[0].dtype)
        else:
            average[key] = tensors[-1]
    newest = loaded[-1]
    sources = [str(p) for p in paths]
    Checkpoint(average, newest.card, newest.config, newest.step, averaged_from=sources).save(output)
    return output
