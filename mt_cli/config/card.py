"""A trained model's card: what it says about itself (architecture, languages, tokenizer files,
corpus, decoding defaults, parent). Inference, export and serving read the card, never the
training recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mt_cli.config.rules import check_data, check_decode, check_model
from mt_cli.config.schema import build
from mt_cli.config.sections import Config, DataConfig, DecodeConfig, ModelConfig
from mt_cli.disk.layout import tokenizer_file


@dataclass(frozen=True)
class ParentCard:
    """The checkpoint a warm-started model began from (``train.init_from``)."""

    run: str  # the parent's run directory, as the recipe named it
    checkpoint: str  # the checkpoint file the weights came from
    sha256: str  # of that file when the new run started: says whether it is still the same file


@dataclass(frozen=True)
class ModelCard:
    """What inference needs to know about a trained model, and nothing of how it was trained."""

    model: ModelConfig
    data: DataConfig  # its languages and corpus (`mt eval --split` reads the corpus from here)
    decode: DecodeConfig  # the decoding it was tuned with: beam, length penalty, length limits
    src_tokenizer: str  # file names in the run directory
    tgt_tokenizer: str
    parent: ParentCard | None = None  # None: trained from scratch (and every card older than warm starts)

    @classmethod
    def of(cls, cfg: Config) -> ModelCard:
        # One tokenizer per side, named by its language(s): "de", or "de+fr+cs" for a many-to-one model.
        return cls(cfg.model, cfg.data, cfg.decode, *(tokenizer_file(side) for side in cfg.data.sides()))


def card_from_dict(raw: dict[str, Any]) -> ModelCard:
    """A card saved with ``config_to_dict``, checked by the rules of the sections inference reads."""
    return _checked(build(ModelCard, raw, prefix=""))


def card_from_config_dict(raw: dict[str, Any]) -> ModelCard:
    """The card of a checkpoint that only saved its training recipe: the recipe's data, model and
    decode sections, without checking (or even reading) its training sections."""
    sections = {name: raw.get(name, {}) for name in ("model", "data", "decode")}
    recipe = build(Config, sections, prefix="")  # the other sections take their defaults
    return _checked(ModelCard.of(recipe))


def _checked(card: ModelCard) -> ModelCard:
    check_data(card.data)
    check_model(card.model)
    check_decode(card.decode, card.model)
    return card
