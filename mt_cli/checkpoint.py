"""The run directory and its checkpoints: atomic saves, safe loads.

A checkpoint is data, never code: loads use ``torch.load(weights_only=True)``. Every write goes
to a temporary file in the same directory and is renamed into place, so a crash or Ctrl-C in
the middle of a save leaves the previous file intact.
"""

from __future__ import annotations

import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mt_cli.config import Config, config_from_dict, load_config
from mt_cli.errors import CheckpointError, ConfigError
from mt_cli.files import atomic_write_bytes


@dataclass(frozen=True)
class RunDir:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def last(self) -> Path:
        return self.checkpoints / "last.pt"

    @property
    def best(self) -> Path:
        return self.checkpoints / "best.pt"

    @property
    def log(self) -> Path:
        return self.root / "train.log"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def test_scores(self) -> Path:
        return self.root / "test.json"

    def previous_training(self) -> list[Path]:
        """What an earlier training left here; tokenizers and config.yaml (from `mt prepare`) do not count."""
        return ([self.metrics] if self.metrics.exists() else []) + sorted(self.checkpoints.glob("*.pt"))

    def step_checkpoint(self, step: int) -> Path:
        return self.checkpoints / f"step{step:07d}.pt"

    def step_checkpoints(self) -> list[Path]:
        """Validation checkpoints kept for averaging, oldest first."""
        return sorted(self.checkpoints.glob("step*.pt"))

    def load_config(self) -> Config:
        if not self.config.exists():
            raise CheckpointError(
                f"{self.root} is not a trained run (no config.yaml); train one with "
                "`mt train --config configs/multi30k.yaml`"
            )
        return load_config(self.config)


def save_checkpoint(payload: dict[str, Any], path: Path) -> None:
    atomic_write_bytes(path, lambda handle: torch.save(payload, handle))


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint as plain data; any damage becomes a one-line CheckpointError."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(
            f"checkpoint {path} does not exist; train a model with `mt train --config configs/multi30k.yaml`"
        )
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except (RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CheckpointError(
            f"checkpoint {path} is damaged or truncated ({reason}); retrain or pick another"
        ) from None
    if not isinstance(payload, dict) or "model" not in payload or "config" not in payload:
        raise CheckpointError(f"checkpoint {path} is not an mt checkpoint (no model weights and config)")
    return payload


def checkpoint_config(payload: dict[str, Any], path: Path) -> Config:
    """The model's configuration as saved with its weights."""
    try:
        return config_from_dict(payload["config"])
    except ConfigError as err:
        raise CheckpointError(f"checkpoint {path} holds a config this version cannot read: {err}") from None


def average_checkpoints(paths: list[Path], output: Path) -> Path:
    """Write the parameter average of ``paths`` (same architecture) as a new checkpoint."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    payloads = [load_checkpoint(p) for p in paths]
    keys = payloads[0]["model"].keys()
    for path, payload in zip(paths, payloads):
        if payload["model"].keys() != keys or payload["config"]["model"] != payloads[0]["config"]["model"]:
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
            "config": newest["config"],
            "step": newest.get("step"),
            "averaged_from": [str(p) for p in paths],
        },
        output,
    )
    return output
