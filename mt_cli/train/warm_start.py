"""Warm start: a new run that begins from another run's checkpoint, or from a published Marian
model (``train.init_from``: RUN[:CHECKPOINT], hf:OWNER/NAME[@REVISION] or a directory transformers
saved; the last two are converted in memory as `mt import` converts them, ``pretrained``).

The new run takes the parent's weights and its tokenizers (copied into the run, never retrained:
the weights index their pieces), starts a fresh optimizer and learning-rate schedule unless
``train.init_keep`` names ``optimizer`` (AdamW's moments; the parent's checkpoint must hold them,
as last.pt does) or ``schedule`` (update n of the new run gets the learning rate of update
parent + n), may freeze parts of the model (``train.freeze``), and scores the parent on its own
validation set at update 0, so that its curve starts at the parent's score. Its card names the
parent (run, checkpoint, SHA-256 of the checkpoint file; for a published model: the hub id and
revision, or the directory, and the SHA-256 of its weights file). The recipe's ``model`` and
``tokenizer`` sections default to the parent's (``parent_sections``).

Everything about the parent is checked before the run directory is made (``find_parent``): that
it exists, that it translates the same languages with the same tokenizer settings and the same
architecture (only the dropout rates, which are training settings, may differ), and that it holds
what ``init_keep`` asks for. A resumed warm start needs no parent: its run has everything.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from mt_cli.checkpoint import Checkpoint
from mt_cli.config.card import ModelCard, ParentCard
from mt_cli.config.recipe import config_to_dict
from mt_cli.config.schema import build
from mt_cli.config.sections import Config, ModelConfig, TokenizerConfig, TrainConfig
from mt_cli.disk.files import atomic_write_bytes, file_sha256
from mt_cli.disk.layout import RunDir, run_and_checkpoint
from mt_cli.errors import CheckpointError, ConfigError
from mt_cli.model.transformer import Transformer
from mt_cli.pretrained.importing import convert
from mt_cli.pretrained.source import is_import_source
from mt_cli.train.shrink import STACKS, describe, shrink, shrink_plan
from mt_cli.trained import trained_from

# Model keys a child may change: they act in training only, not on what the weights are.
_REGULARISATION = (
    "dropout",
    "attention_dropout",
    "activation_dropout",
    "src_token_dropout",
    "tgt_token_dropout",
    "src_token_replace",
    "tgt_token_replace",
)
# Tokenizer keys that say how to train the tokenizers or sample training pieces, not what they are.
_TOKENIZER_TRAINING = ("sample_sentences", "src_bpe_dropout", "tgt_bpe_dropout")
_OPTIMIZER_SETTINGS = ("betas", "eps", "weight_decay")


@dataclass(frozen=True)
class Parent:
    """A checked parent: its checkpoint (the update it was saved at, maybe its optimizer state),
    its fp32 weights, and its tokenizer files, to copy into the new run."""

    checkpoint: Path | str  # the file, or what a published model was imported from
    saved: Checkpoint
    weights: dict[str, Tensor]  # mt parameter name -> tensor, checked against its tokenizers
    tokenizer_files: dict[str, bytes]  # name in a run directory -> content
    step: int  # the update it was saved at
    record: ParentCard  # what the new run's card says about it
    layers: dict[str, list[int]]  # stack -> the parent's layers kept, where the new model is shallower


def parent_sections(spec: str, languages: tuple[str, str]) -> dict[str, dict[str, Any]]:
    """The parent's ``model`` and ``tokenizer`` sections, as a recipe writes them: what a warm
    start's recipe (translating ``languages``) inherits where it leaves them out
    (``config.recipe.load_config``)."""
    if is_import_source(spec):
        config = convert(spec, unsaid=languages).config
        return {"model": config_to_dict(config.model), "tokenizer": config_to_dict(config.tokenizer)}
    root, name = run_and_checkpoint(spec)
    try:
        path = RunDir(root).existing().find_checkpoint(name)
    except CheckpointError as err:
        raise CheckpointError(f"train.init_from: {err}") from None
    saved = Checkpoint.load(path)
    recipe = saved.config or {}
    sections = {"model": config_to_dict(saved.card.model)}
    if isinstance(recipe.get("tokenizer"), dict):
        sections["tokenizer"] = recipe["tokenizer"]
    return sections


def find_parent(spec: str, cfg: Config, run: RunDir) -> Parent:
    """The parent ``spec`` (``cfg.train.init_from``: an mt run, or a published model to import)
    names, checked against ``cfg`` and against the tokenizers already in the new ``run`` (from an
    earlier `mt prepare`), before anything is written."""
    if is_import_source(spec):
        return _imported_parent(spec, cfg, run)
    root, name = run_and_checkpoint(spec)
    try:
        parent_run = RunDir(root).existing()
        path = parent_run.find_checkpoint(name)
    except CheckpointError as err:
        raise CheckpointError(f"train.init_from: {err}") from None
    saved = Checkpoint.load(path)
    plan = _check(cfg, saved, str(root), path)
    step = _check_kept_state(cfg, saved, path, plan)
    # the parent has them; the new run has none, or the same
    files = _tokenizer_files(parent_run, saved.card.data.sides(), run, cfg)
    try:
        trained = trained_from(parent_run, path, saved)
    except CheckpointError as err:
        raise CheckpointError(f"train.init_from: {err}") from None
    record = ParentCard(str(root), str(path), file_sha256(path))
    return Parent(path, saved, shrink(trained.model.state_dict(), plan), files, step, record, plan)


def _imported_parent(spec: str, cfg: Config, run: RunDir) -> Parent:
    """A published model, converted in memory (``pretrained.importing``) and checked as a run would be."""
    converted = convert(spec, unsaid=(cfg.data.src_lang, cfg.data.tgt_lang))
    saved = converted.checkpoint
    plan = _check(cfg, saved, spec, spec)
    step = _check_kept_state(cfg, saved, spec, plan)
    for name, data in converted.tokenizer_files.items():
        _check_unchanged(run.root / name, data, spec)
    weights = shrink(saved.model, plan)
    return Parent(spec, saved, weights, converted.tokenizer_files, step, converted.parent, plan)


def _check(cfg: Config, saved: Checkpoint, name: str, path: Path | str) -> dict[str, list[int]]:
    """The parent checked against the new run; the layers each shallower stack keeps of it."""
    _check_languages(cfg, saved.card, name)
    _check_architecture(cfg.model, saved.card.model, name)
    _check_tokenizer_settings(cfg.tokenizer, saved, path)
    return shrink_plan(cfg.model, saved.card.model, name)


def _check_languages(cfg: Config, card: ModelCard, root: str) -> None:
    """The new run's languages on each side must be among the parent's (a de->en child of a
    de<->en or a many-to-English parent), and it must tag its sources with the target language
    exactly when the parent did: the parent's tokenizers and embeddings know those only."""
    ours, theirs = cfg.data.sides(), card.data.sides()  # a side is named after its languages: "de+fr+cs"
    within = all(
        set(mine) <= set(parents)
        for mine, parents in zip(cfg.data.languages(), card.data.languages(), strict=True)
    )
    if not within:
        raise CheckpointError(
            f"train.init_from: {root} translates {'->'.join(theirs)} and this config {'->'.join(ours)}; "
            "the parent's tokenizers and embeddings fit its own languages only: start from a run "
            f"whose languages include {'->'.join(ours)}"
        )
    tagged = card.data.uses_target_tags()
    if tagged != cfg.data.uses_target_tags():
        fix = "set data.target_tags: true" if tagged else "leave data.target_tags unset"
        raise CheckpointError(
            f"train.init_from: {root} reads {'a' if tagged else 'no'} target-language tag (<2xx>) "
            f"before its sources, and the new run would {'not ' if tagged else ''}put one there: {fix}"
        )


def _differences(section: str, ours: Any, theirs: Any, free: Collection[str]) -> list[str]:
    """``section.key=ours (parent: theirs)`` for each field of two configs of one class that
    differs, apart from those in ``free``."""
    return [
        f"{section}.{f.name}={getattr(ours, f.name)} (parent: {getattr(theirs, f.name)})"
        for f in dataclasses.fields(ours)
        if f.name not in free and getattr(ours, f.name) != getattr(theirs, f.name)
    ]


def _require_same(section: str, ours: Any, theirs: Any, free: Collection[str], why: str, advice: str) -> None:
    """CheckpointError listing the fields of ``section`` where the new run and its parent differ."""
    differ = _differences(section, ours, theirs, free)
    if differ:
        raise CheckpointError(f"train.init_from: {why}: {', '.join(differ)}; {advice}")


def _check_architecture(ours: ModelConfig, theirs: ModelConfig, root: str) -> None:
    why = f"the new run takes {root}'s weights, so its model section must match"
    _require_same(
        "model",
        ours,
        theirs,
        _REGULARISATION + tuple(STACKS),  # fewer layers: shrink_plan
        why,
        "set them as the parent's (only the dropout rates and the number of layers may differ)",
    )


def _check_tokenizer_settings(ours: TokenizerConfig, saved: Checkpoint, path: Path | str) -> None:
    recipe = saved.config
    if recipe is None or not isinstance(recipe.get("tokenizer"), dict):
        raise CheckpointError(
            f"train.init_from: {path} holds no training recipe, so its tokenizer settings are unknown; "
            "start from a checkpoint that mt train wrote"
        )
    try:
        theirs = build(TokenizerConfig, recipe["tokenizer"], prefix="tokenizer.")
    except ConfigError as err:
        raise CheckpointError(
            f"train.init_from: {path} has tokenizer settings this version cannot read: {err}"
        ) from None
    why = f"the new run adopts the tokenizers of {path}, never retrains them"
    _require_same("tokenizer", ours, theirs, _TOKENIZER_TRAINING, why, "set them as the parent's")


def _check_kept_state(cfg: Config, saved: Checkpoint, path: Path | str, plan: dict[str, list[int]]) -> int:
    """The update ``saved`` was written at, once it holds what ``train.init_keep`` asks for."""
    if "optimizer" in cfg.train.init_keep and plan:
        raise CheckpointError(
            f"train.init_keep has optimizer, but this model keeps fewer layers than {path}, so the "
            "parent's optimizer state does not fit it; drop optimizer from train.init_keep"
        )
    if "optimizer" in cfg.train.init_keep and saved.optimizer is None:
        raise CheckpointError(
            f"train.init_keep has optimizer, but {path} holds no optimizer state (only last.pt does); "
            "start from RUN:last, or drop optimizer from train.init_keep"
        )
    if saved.step is None:
        raise CheckpointError(f"train.init_from: {path} does not say at which update it was saved")
    return saved.step


def _tokenizer_files(parent: RunDir, sides: tuple[str, str], run: RunDir, cfg: Config) -> dict[str, bytes]:
    """The parent's tokenizer models (with their vocabularies, for an imported model's) and their
    settings records, by the name each has in the new run (its own sides', where it translates
    fewer languages than the parent's ``sides``), each checked against what the new run holds."""
    files: dict[str, bytes] = {}
    for ours, theirs in zip(cfg.data.sides(), sides, strict=True):
        needed = [(parent.tokenizer(theirs), run.tokenizer(ours))]
        if cfg.tokenizer.imported:  # an imported model's pieces are numbered by this file
            needed.append((parent.tokenizer_vocabulary(theirs), run.tokenizer_vocabulary(ours)))
        for source, target in needed:
            if not source.is_file():
                raise CheckpointError(
                    f"train.init_from: {source} is missing; the parent's weights index its pieces, so a "
                    "warm start needs it"
                )
            files[target.name] = source.read_bytes()
            _check_unchanged(target, files[target.name], str(source))
        settings = parent.tokenizer_settings(theirs)
        if settings.is_file():  # what it was trained on: records the tokenizer's origin
            files[run.tokenizer_settings(ours).name] = settings.read_bytes()
    return files


def _check_unchanged(target: Path, data: bytes, source: str) -> None:
    if target.exists() and target.read_bytes() != data:
        raise CheckpointError(
            f"{target} differs from the parent's ({source}): a warm start adopts the parent's "
            "tokenizers; train into a new --run"
        )


def adopt_tokenizers(parent: Parent, run: RunDir, log: Callable[[str], None]) -> None:
    """Write the parent's tokenizer files into the new run."""
    for name, data in parent.tokenizer_files.items():
        atomic_write_bytes(run.root / name, lambda handle, data=data: handle.write(data))
    log(f"tokenizers: adopted from {parent.record.run} (never retrained in a warm start)")


def _parts(model: Transformer) -> dict[str, list[nn.Module]]:
    """The modules behind each ``train.freeze`` name. With ``model.tie_output`` the output projection
    and the target embedding are one matrix, so freezing either freezes both; with
    ``model.share_embeddings`` the two embeddings are one. Positions are sinusoidal: nothing to freeze."""
    return {
        "encoder": [model.encoder, model.encoder_norm],
        "embeddings": [model.src_embed, model.tgt_embed],
        "decoder": [model.decoder, model.decoder_norm],
        "output": [model.output],
    }


def freeze(model: Transformer, parts: list[str]) -> None:
    """Stop ``parts`` (``train.freeze`` names) from learning: no gradient, and so no optimizer entry."""
    modules = _parts(model)
    for name in parts:
        for module in modules[name]:
            module.requires_grad_(False)


def keep_optimizer(optimizer: torch.optim.Optimizer, parent: Parent) -> None:
    """Give ``optimizer`` the parent's state (AdamW's moments) with this recipe's settings."""
    # load_state_dict also brings the parent's hyper-parameters; this recipe's are the ones to use.
    settings = [{key: group[key] for key in _OPTIMIZER_SETTINGS} for group in optimizer.param_groups]
    try:
        optimizer.load_state_dict(parent.saved.optimizer or {})
    except (ValueError, KeyError) as err:
        raise CheckpointError(
            f"train.init_keep: the optimizer state of {parent.checkpoint} does not fit this model ({err})"
        ) from None
    for group, kept in zip(optimizer.param_groups, settings, strict=True):
        group.update(kept)


def started_from(parent: Parent, tc: TrainConfig, model: nn.Module) -> str:
    """The log line of a warm start: the parent, what was kept of it, what is frozen."""
    kept = []
    if "optimizer" in tc.init_keep:
        kept.append("its optimizer state")
    if "schedule" in tc.init_keep:
        kept.append(f"its schedule from update {parent.step}")
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    return (
        f"warm start from {parent.checkpoint} (update {parent.step}, sha256 {parent.record.sha256[:12]}): "
        + (f"keeping {' and '.join(kept)}" if kept else "a fresh optimizer and schedule")
        + (f"; {describe(parent.layers)}" if parent.layers else "")
        + (f"; frozen: {', '.join(tc.freeze)} ({frozen / 1e6:.2f}M parameters)" if tc.freeze else "")
    )
