"""The files of a Marian model as transformers saves it, read and checked before anything is built.

config.json, the weights (model.safetensors, else pytorch_model.bin), MarianTokenizer's files
(source.spm, target.spm, vocab.json, and target_vocab.json when tokenizer_config.json says
``separate_vocabs``) and generation_config.json when there is one. Each missing or unreadable
file is one line (a CheckpointError) naming it; so is a SentencePiece model that does not load or
whose pieces its vocabulary mostly lacks (``MAX_MISSING_PIECES``), and weights that are not a
state dict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor

from mt_cli.disk.files import file_sha256
from mt_cli.errors import CheckpointError
from mt_cli.text.pieces import load_processor

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# OPUS-MT's vocab.json holds every piece of both SentencePiece models: a model with more than this
# share of its pieces missing from its vocabulary is not that vocabulary's (another model's, the
# sides swapped) and would cut text into pieces the model reads as <unk>.
MAX_MISSING_PIECES = 0.25


@dataclass(frozen=True)
class SavedMarian:
    """What a Marian directory holds, as plain data; the weights are read on demand (``weights``)."""

    directory: Path
    config: dict[str, Any]
    tokenizer_config: dict[str, Any]
    generation: dict[str, Any]  # generation_config.json; {} when there is none
    weights_file: Path
    source_spm: Path
    target_spm: Path
    source_vocabulary: dict[str, int]  # piece -> Marian id
    target_vocabulary: dict[str, int]  # the same table unless separate_vocabs

    def weights(self) -> dict[str, Tensor]:
        """The state dict, on the CPU, without running any code from the file."""
        import pickle

        import torch
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        path = self.weights_file
        try:
            if path.suffix == ".safetensors":
                return load_file(path, device="cpu")
            loaded = torch.load(path, map_location="cpu", weights_only=True)
        except (SafetensorError, OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as err:
            said = next(iter(str(err).splitlines()), "")  # an empty file's EOFError says nothing
            raise CheckpointError(
                f"{path} is not a readable weights file ({type(err).__name__}{': ' if said else ''}{said})"
            ) from None
        return _state_dict(path, loaded)

    def weights_sha256(self) -> str:
        return file_sha256(self.weights_file)


def read_saved(directory: Path) -> SavedMarian:
    """The checked files of the Marian directory ``directory``."""
    config = _json(directory / "config.json", required=True)
    tokenizer_config = _json(directory / "tokenizer_config.json", required=False)
    separate = bool(tokenizer_config.get("separate_vocabs", False))
    source_vocabulary = _vocabulary(directory / "vocab.json")
    target_vocabulary = _vocabulary(directory / "target_vocab.json") if separate else source_vocabulary
    target_table = "target_vocab.json" if separate else "vocab.json"
    return SavedMarian(
        directory,
        config,
        tokenizer_config,
        _json(directory / "generation_config.json", required=False),
        _weights_file(directory),
        _sentencepiece(directory / "source.spm", "source", source_vocabulary, "vocab.json"),
        _sentencepiece(directory / "target.spm", "target", target_vocabulary, target_table),
        source_vocabulary,
        target_vocabulary,
    )


def _state_dict(path: Path, loaded: object) -> dict[str, Tensor]:
    """What torch.load read, if it is a state dict (tensors by name)."""
    if not (
        isinstance(loaded, dict)
        and all(isinstance(name, str) and isinstance(tensor, Tensor) for name, tensor in loaded.items())
    ):
        raise CheckpointError(
            f"{path} holds a {type(loaded).__name__} that is not a state dict (tensors by name); "
            "is it a model's weights file?"
        )
    return loaded


def _file(path: Path, what: str) -> Path:
    if not path.is_file():
        raise CheckpointError(f"{path} ({what}) is missing; a Marian model directory needs it")
    return path


def _sentencepiece(path: Path, side: str, vocabulary: dict[str, int], table: str) -> Path:
    """``path``, the ``side``'s SentencePiece model, once it loads and at most
    ``MAX_MISSING_PIECES`` of its pieces are missing from ``vocabulary`` (the file ``table``)."""
    model = load_processor(
        _file(path, f"the {side} SentencePiece model"),
        missing="a Marian model directory needs it",
        corrupt="the model directory is damaged; fetch or save it again",
    )
    pieces = [
        model.id_to_piece(i)
        for i in range(model.get_piece_size())
        if not (model.is_control(i) or model.is_unknown(i) or model.is_unused(i))
    ]
    missing = sum(piece not in vocabulary for piece in pieces)
    if missing > MAX_MISSING_PIECES * len(pieces):
        raise CheckpointError(
            f"{path} is not the tokenizer of {path.parent / table}: {missing} of its {len(pieces)} pieces "
            f"({missing / len(pieces):.0%}) are missing from it, more than {MAX_MISSING_PIECES:.0%}; it is "
            "another model's, or source.spm and target.spm are swapped"
        )
    return path


def _weights_file(directory: Path) -> Path:
    for name in WEIGHT_FILES:
        if (directory / name).is_file():
            return directory / name
    raise CheckpointError(f"{directory} holds no weights ({' or '.join(WEIGHT_FILES)})")


def _json(path: Path, required: bool) -> dict[str, Any]:
    if not path.is_file():
        if required:
            raise CheckpointError(f"{path} is missing; is this a model directory saved by transformers?")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path} is not readable JSON ({str(err).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} must hold a JSON object, not {type(data).__name__}")
    return data


def _vocabulary(path: Path) -> dict[str, int]:
    table = _json(_file(path, "MarianTokenizer's vocabulary"), required=True)
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in table.values()):
        raise CheckpointError(f"{path} must map each piece to a non-negative integer id")
    return table
