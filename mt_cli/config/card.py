"""A trained model's card: what it says about itself (architecture, languages, tokenizer files,
corpus, decoding defaults, parent). Inference, export and serving read the card, never the
training recipe."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mt_cli.config.legacy import upgrade_corpora
from mt_cli.config.options import TranslateOptions
from mt_cli.config.rules import check_data, check_decode, check_model
from mt_cli.config.schema import build
from mt_cli.config.sections import Config, DataConfig, DecodeConfig, ModelConfig
from mt_cli.disk.layout import tokenizer_file, vocabulary_file
from mt_cli.errors import InputError


@dataclass(frozen=True)
class ParentCard:
    """The checkpoint a warm-started model began from (``train.init_from``)."""

    run: str  # the parent's run directory, as the recipe named it
    checkpoint: str  # the checkpoint file the weights came from
    sha256: str  # of that file when the new run started: says whether it is still the same file
    revision: str | None = None  # the hub revision (commit) of an imported model (``run``: hf:OWNER/NAME)


@dataclass(frozen=True)
class ModelCard:
    """What inference needs to know about a trained model, and nothing of how it was trained."""

    model: ModelConfig
    data: DataConfig  # its languages and corpus (`mt eval --split` reads the corpus from here)
    decode: DecodeConfig  # the decoding it was tuned with: beam, length penalty, length limits
    src_tokenizer: str  # file names in the run directory
    tgt_tokenizer: str
    parent: ParentCard | None = None  # None: trained from scratch (and every card older than warm starts)
    # The vocabulary files numbering an imported model's pieces (``text.vocabulary``); None: the
    # SentencePiece models' own ids (every model mt trained).
    src_vocabulary: str | None = None
    tgt_vocabulary: str | None = None

    @classmethod
    def of(cls, cfg: Config) -> ModelCard:
        # One tokenizer per side, named by its language(s): "de", or "de+fr+cs" for a many-to-one model.
        src, tgt = cfg.data.sides()
        imported = cfg.tokenizer.imported  # numbered by vocabulary files (``text.vocabulary``)
        return cls(
            cfg.model,
            cfg.data,
            cfg.decode,
            tokenizer_file(src),
            tokenizer_file(tgt),
            src_vocabulary=vocabulary_file(src) if imported else None,
            tgt_vocabulary=vocabulary_file(tgt) if imported else None,
        )

    def resolve(self, options: TranslateOptions, vocabulary: int | None = None) -> TranslateOptions:
        """``options`` with this model's decoding defaults and target language filled in, checked
        (``TranslateOptions.resolved``; ``vocabulary``: the size of its target vocabulary)."""
        tgt_lang = target_language(self.data, options.tgt_lang, options.src_lang)
        return options.resolved(self.decode.beam_size, self.decode.length_penalty, tgt_lang, vocabulary)


def describe_directions(directions: Sequence[tuple[str, str]]) -> str:
    """``"de -> en, fr -> en"``: the directions a model knows, as messages name them."""
    return ", ".join(f"{src} -> {tgt}" for src, tgt in directions)


def target_language(data: DataConfig, tgt_lang: str | None = None, src_lang: str | None = None) -> str:
    """The language to write: ``tgt_lang``, or the card's ``data.tgt_lang``. An ``InputError``
    naming what the model knows if it was not trained to write it, if ``src_lang`` is given and
    it was not trained to read that, or if it does not know the direction ``src_lang`` -> it."""
    sources, targets = data.languages()
    tgt = data.tgt_lang if tgt_lang is None else tgt_lang
    if tgt not in targets:
        raise InputError(
            f"target language {tgt!r} is not one this model writes; it writes {', '.join(targets)}"
        )
    if src_lang is not None:
        if src_lang not in sources:
            raise InputError(
                f"source language {src_lang!r} is not one this model reads; it reads {', '.join(sources)}"
            )
        if (src_lang, tgt) not in data.directions():
            raise InputError(
                f"{src_lang} -> {tgt} is not a direction this model was trained on; "
                f"it knows {describe_directions(data.directions())}"
            )
    return tgt


def card_from_dict(raw: dict[str, Any]) -> ModelCard:
    """A card saved with ``config_to_dict``, checked by the rules of the sections inference reads."""
    return _checked(build(ModelCard, upgrade_corpora(raw, warn=False), prefix=""))


def card_from_config_dict(raw: dict[str, Any]) -> ModelCard:
    """The card of a checkpoint that only saved its training recipe: the recipe's data, model and
    decode sections, without checking (or even reading) its training sections."""
    sections = upgrade_corpora({name: raw.get(name, {}) for name in ("model", "data", "decode")}, warn=False)
    recipe = build(Config, sections, prefix="")  # the other sections take their defaults
    return _checked(ModelCard.of(recipe))


def _checked(card: ModelCard) -> ModelCard:
    check_data(card.data)
    check_model(card.model)
    check_decode(card.decode, card.model)
    return card
