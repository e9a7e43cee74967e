"""A trained model as every consumer loads it: card, tokenizers, fp32 weights, checkpoint.

``load_trained`` opens a run directory's checkpoint (``layout.RunDir.find_checkpoint``: None is
best.pt) and gives a ``TrainedModel``; the decoder (``decode.Translator.of``), the exporters,
back-translation, warm start, the benchmarks and the API all start from one. Nothing here
decodes: an export needs the weights and the tokenizers, not a search. A published model that
``mt import`` wrote is an ordinary run directory and loads here like any other; the in-memory
conversion a warm start from one takes (``pretrained.importing.convert``) does not pass here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mt_cli.checkpoint import Checkpoint
from mt_cli.config.card import ModelCard
from mt_cli.disk.layout import RunDir
from mt_cli.errors import CheckpointError
from mt_cli.model.transformer import Transformer, build_model
from mt_cli.text.tokenizer import Tokenizer, card_tokenizers


@dataclass(frozen=True)
class TrainedModel:
    """A model with what it needs to translate. ``model`` holds fp32 weights on the CPU in eval
    mode as loaded; whoever takes it for inference (``Translator.of``) may move and cast it."""

    card: ModelCard
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    model: Transformer
    checkpoint: Path | None = None  # the file the weights came from; None for a model in memory

    @property
    def origin(self) -> str:
        return str(self.checkpoint) if self.checkpoint is not None else "a model in memory"


def load_trained(run_dir: str | Path, checkpoint: str | None = None) -> TrainedModel:
    """The run's checkpoint ``checkpoint`` (a name in the run or a file; None: best.pt) with the
    run's tokenizers. Whatever is missing or damaged is a one-line CheckpointError."""
    run = RunDir(Path(run_dir)).existing()
    path = run.find_checkpoint(checkpoint)
    return trained_from(run, path, Checkpoint.load(path))


def trained_from(run: RunDir, path: Path, saved: Checkpoint) -> TrainedModel:
    """The model of ``saved`` (loaded from ``path``) with the tokenizers of ``run`` its card names:
    for a caller that reads more of the checkpoint than the weights (a warm start's optimizer)."""
    card = saved.card
    src_tok, tgt_tok = card_tokenizers(card, run.root)
    model = build_model(card.model, src_tok.vocab_size, tgt_tok.vocab_size)
    try:
        model.load_state_dict(saved.model)
    except RuntimeError as err:
        raise CheckpointError(
            f"{path} does not match the tokenizers in {run.root} (vocabularies "
            f"{src_tok.vocab_size}/{tgt_tok.vocab_size}; {_first_mismatch(err)}); give a "
            "checkpoint trained with that run's tokenizers"
        ) from None
    return TrainedModel(card, src_tok, tgt_tok, model.eval(), path)


def _first_mismatch(err: RuntimeError) -> str:
    """The first thing torch's load_state_dict error names (its first line only says "Error(s) in
    loading state_dict for Transformer:"), shortened: "size mismatch for NAME: checkpoint [600, 64],
    model [500, 64]"."""
    details = [line.strip() for line in str(err).splitlines()[1:] if line.strip()]
    if not details:
        return str(err).strip().rstrip(":") or type(err).__name__
    size = re.match(
        r"size mismatch for (\S+): copying a param with shape torch\.Size\((\[.*?\])\) from checkpoint, "
        r"the shape in current model is torch\.Size\((\[.*?\])\)",
        details[0],
    )
    if size is not None:
        return f"size mismatch for {size[1]}: checkpoint {size[2]}, model {size[3]}"
    return details[0].rstrip(".")
