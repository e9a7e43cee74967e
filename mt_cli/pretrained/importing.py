"""``mt import``: a published Marian model (a directory transformers saved, or ``hf:OWNER/NAME``)
as an ordinary mt run directory: config.yaml, the two tokenizers with their vocabularies, and
``checkpoints/best.pt`` whose card names where it came from (the parent: hub id and revision, or
directory, and the SHA-256 of the weights file).

Everything is read, converted and checked before the run is written, and the run is written into a
temporary directory beside it that is renamed into place at the end: a failed or interrupted import
leaves no run directory behind.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mt_cli.checkpoint import Checkpoint
from mt_cli.config.card import ModelCard, ParentCard
from mt_cli.config.recipe import config_to_dict, save_config
from mt_cli.config.rules import check_recipe
from mt_cli.config.sections import Config, CorpusConfig, DataConfig, DecodeConfig, TokenizerConfig
from mt_cli.disk.files import atomic_write_bytes, unwritable, writing
from mt_cli.disk.layout import RunDir, tokenizer_file, vocabulary_file
from mt_cli.errors import CheckpointError, ConfigError, InputError
from mt_cli.pretrained.marian import MarianImport, convert_marian
from mt_cli.pretrained.marian_config import count, number
from mt_cli.pretrained.marian_vocab import language_code, mt_pieces
from mt_cli.pretrained.saved import SavedMarian, read_saved
from mt_cli.pretrained.source import locate
from mt_cli.text.vocabulary import write_vocabulary


@dataclass(frozen=True)
class Converted:
    """A published model in mt's terms, in memory: the run's recipe, its checkpoint (card with the
    parent, weights, step 0), and the tokenizer files by their name in a run directory."""

    config: Config
    checkpoint: Checkpoint
    tokenizer_files: dict[str, bytes]
    parent: ParentCard

    @property
    def parameters(self) -> int:
        return sum(tensor.numel() for tensor in self.checkpoint.model.values())


def convert(
    spec: str,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    run_dir: str = "",
    unsaid: tuple[str, str] | None = None,
) -> Converted:
    """The model ``spec`` names (``pretrained.source``) converted, nothing written. ``src_lang`` and
    ``tgt_lang`` override the languages tokenizer_config.json gives; ``unsaid`` (source, target) are
    the languages to assume where it gives none (a warm start's recipe's). A ConfigError,
    CheckpointError or InputError (exit 2), or a RunFailure (exit 3: the hub unreachable), in one line."""
    located = locate(spec)
    saved = read_saved(located.directory)
    converted = _converted(saved)
    assert converted.src_order is not None and converted.tgt_order is not None  # renumbered
    pieces = (
        mt_pieces(saved.source_vocabulary, converted.src_order),
        mt_pieces(saved.target_vocabulary, converted.tgt_order),
    )
    cfg = recipe(saved, converted, run_dir, _languages(saved, src_lang, tgt_lang, unsaid))
    parent = ParentCard(located.name, saved.weights_file.name, saved.weights_sha256(), located.revision)
    card = dataclasses.replace(ModelCard.of(cfg), parent=parent)
    checkpoint = Checkpoint(converted.state_dict, card, config=config_to_dict(cfg), step=0)
    src, tgt = cfg.data.sides()
    files = {
        tokenizer_file(src): saved.source_spm.read_bytes(),
        tokenizer_file(tgt): saved.target_spm.read_bytes(),
        vocabulary_file(src): write_vocabulary(pieces[0]),
        vocabulary_file(tgt): write_vocabulary(pieces[1]),
    }
    return Converted(cfg, checkpoint, files, parent)


def import_model(
    spec: str, run_dir: Path, src_lang: str | None = None, tgt_lang: str | None = None
) -> Converted:
    """``mt import``: the model ``spec`` names as the new run ``run_dir`` (``convert``, then written)."""
    run = RunDir(run_dir)
    _check_new(run)
    _check_writable(run)
    converted = convert(spec, src_lang, tgt_lang, str(run_dir))
    _write(run, converted)
    return converted


def _check_new(run: RunDir) -> None:
    if run.root.is_file():
        raise CheckpointError(f"{run.root} is a file; give a new directory for --run")
    if run.root.is_dir() and any(run.root.iterdir()):
        raise CheckpointError(f"{run.root} already exists and is not empty; import into a new --run")


def _check_writable(run: RunDir) -> None:
    """The directory the run is made in (its nearest existing ancestor) takes new entries: an
    InputError (exit 2) before the work, not a failure to write (exit 3) after it."""
    place = run.root.parent
    while not place.exists():
        place = place.parent
    if not place.is_dir():
        raise InputError(f"--run {run.root}: {place} is a file; give a directory for the run")
    reason = unwritable(place)
    if reason is not None:
        raise InputError(f"--run {run.root}: directory {place} is not writable ({reason}); import elsewhere")


def _converted(saved: SavedMarian) -> MarianImport:
    unk = saved.source_vocabulary.get("<unk>")
    if unk is None:
        raise CheckpointError(f"{saved.directory / 'vocab.json'} has no <unk>; MarianTokenizer needs one")
    for name, table, key in (
        ("vocab.json", saved.source_vocabulary, "vocab_size"),
        ("target_vocab.json" if saved.target_vocabulary is not saved.source_vocabulary else "vocab.json",
         saved.target_vocabulary, "decoder_vocab_size"),
    ):  # fmt: skip
        size = saved.config.get(key) or saved.config.get("vocab_size")
        ids = max(table.values(), default=-1) + 1
        if ids != size:
            raise ConfigError(
                f"{saved.directory / name} numbers {ids} pieces but config.json's {key} is {size}: "
                "the tokenizer and the weights do not belong together"
            )
    return convert_marian(saved.config, saved.weights(), unk_id=unk)


def _languages(
    saved: SavedMarian, src_lang: str | None, tgt_lang: str | None, unsaid: tuple[str, str] | None
) -> tuple[str, tuple[str, ...]]:
    """(source language, target languages): a multilingual model's targets are its ``>>xx<<`` codes."""
    said = saved.tokenizer_config
    src = src_lang or said.get("source_lang") or (unsaid[0] if unsaid else None)
    codes = tuple(code for piece in saved.source_vocabulary if (code := language_code(piece)) is not None)
    targets = codes or ((tgt_lang or said.get("target_lang") or (unsaid[1] if unsaid else None)),)
    if src is None or targets[0] is None:
        raise ConfigError(
            f"{saved.directory / 'tokenizer_config.json'} does not say the model's languages "
            "(source_lang, target_lang); give them with --src and --tgt"
        )
    if tgt_lang is not None and codes and tgt_lang not in codes:
        raise ConfigError(f"--tgt {tgt_lang}: the model writes {', '.join(codes)} (its >>xx<< codes)")
    if tgt_lang is not None and codes:  # the default target first
        targets = (tgt_lang,) + tuple(code for code in codes if code != tgt_lang)
    return str(src), tuple(str(lang) for lang in targets)


def recipe(
    saved: SavedMarian, converted: MarianImport, run_dir: str, languages: tuple[str, tuple[str, ...]]
) -> Config:
    """The imported run's config.yaml: its languages (with Multi30k as the corpus `mt eval`
    reads), model, tokenizer sizes and the decoding its generation_config.json asks for."""
    src, targets = languages
    corpora = [CorpusConfig(source="multi30k", src_lang=src, tgt_lang=tgt) for tgt in targets]
    codes = any(language_code(piece) is not None for piece in saved.source_vocabulary)
    data = DataConfig(
        src_lang=src,
        tgt_lang=targets[0],
        corpora=corpora if len(targets) > 1 else [],
        target_tags=codes,
        max_len=min(DataConfig.max_len, converted.model.max_positions - 2),  # <s> and </s> take two
    )
    tokenizer = TokenizerConfig(
        src_vocab_size=converted.src_vocab_size, tgt_vocab_size=converted.tgt_vocab_size, imported=True
    )
    cfg = Config(run_dir or Config.run_dir, data, tokenizer, converted.model, decode=decoding(saved))
    try:
        check_recipe(cfg)
    except ConfigError as err:
        raise ConfigError(f"cannot import as an mt run: {err}") from None
    return cfg


def decoding(saved: SavedMarian) -> DecodeConfig:
    """generation_config.json's ``num_beams`` and ``length_penalty`` (mt's defaults for those it
    leaves out); a ConfigError naming the key for a value that is not a number."""
    defaults = {"num_beams": DecodeConfig.beam_size, "length_penalty": DecodeConfig.length_penalty}

    def get(key: str) -> Any:
        return saved.generation[key] if key in saved.generation else defaults[key]

    file = "generation_config.json"
    return DecodeConfig(
        beam_size=count(get, "num_beams", file=file), length_penalty=number(get, "length_penalty", file=file)
    )


def _write(run: RunDir, converted: Converted) -> None:
    """Write the run into a temporary directory beside ``run`` and rename it into place."""
    staging = run.root.with_name(f".{run.root.name}.importing-{os.getpid()}")
    with writing(staging):
        staging.mkdir(parents=True)
    try:
        inside = RunDir(staging)
        save_config(converted.config, inside.config)
        for name, data in converted.tokenizer_files.items():
            atomic_write_bytes(staging / name, lambda handle, data=data: handle.write(data))
        with writing(inside.checkpoints):
            inside.checkpoints.mkdir()
        converted.checkpoint.save(inside.best)
        with writing(run.root):
            if run.root.is_dir():
                run.root.rmdir()  # empty (``_check_new``)
            staging.rename(run.root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
