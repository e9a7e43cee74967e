"""Where mt keeps its files: the names inside a run directory and inside an export, here only.

Every other module asks ``RunDir`` or ``ExportFiles`` for a path, so a name changes in one place
and ``docs/reference.md`` ("The run directory") can be checked against one class.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mt_cli.errors import CheckpointError


def run_and_checkpoint(spec: str | Path) -> tuple[Path, str | None]:
    """``RUN`` or ``RUN:CHECKPOINT`` (``runs/b:last``, as ``--ensemble`` and ``--init-from`` take
    them) -> (run directory, checkpoint name or file, None for best.pt). A path that exists as
    given is a run, even if it holds a colon; a checkpoint file alone is a CheckpointError that
    says how to name it (its model needs the tokenizers of its run)."""
    text = str(spec)
    if Path(text).is_file():
        path = Path(text)
        here = (
            f"{path.parent.parent}:{path.stem}"
            if path.parent.name == "checkpoints"
            else f"RUN:{path} with the run it was trained in"
        )
        raise CheckpointError(
            f"{path} is a checkpoint file, not a run directory; a checkpoint needs its run's "
            f"tokenizers, so give RUN:CHECKPOINT ({here})"
        )
    run, colon, checkpoint = text.rpartition(":")
    if Path(text).exists() or not colon or not run:
        return Path(text), None
    return Path(run), checkpoint or None


def tokenizer_file(lang: str) -> str:
    """The SentencePiece model of ``lang`` inside a run directory (a model card stores this name)."""
    return f"spm.{lang}.model"


def vocabulary_file(lang: str) -> str:
    """The vocabulary numbering the pieces of ``lang``'s imported SentencePiece model (a card stores
    this name; a model mt trained numbers them with SentencePiece's own ids and has none)."""
    return f"spm.{lang}.vocab.json"


class _InRun:
    """A file or folder at a fixed place inside the run directory."""

    def __init__(self, relative: str) -> None:
        self.relative = relative

    def __get__(self, run: RunDir, owner: type) -> Path:
        return run.root / self.relative


@dataclass(frozen=True)
class RunDir:
    """A run directory: what ``mt train`` writes and every other command reads."""

    root: Path

    config = _InRun("config.yaml")
    log = _InRun("train.log")
    metrics = _InRun("metrics.jsonl")
    test_scores = _InRun("test.json")
    checkpoints = _InRun("checkpoints")
    last = _InRun("checkpoints/last.pt")
    best = _InRun("checkpoints/best.pt")
    average = _InRun("checkpoints/average.pt")
    prepared = _InRun("prepared")  # prepared corpora, one folder per key
    synthetic = _InRun("synthetic")  # pairs this run's model translated for backtranslation corpora
    exports = _InRun("exports")  # what `mt export` and `--engine ctranslate2` make of the run's checkpoints
    tensorboard = _InRun("tensorboard")
    curves = _InRun("curves.png")  # written by `mt plot`
    lock = _InRun(".lock")  # held by the one process that writes into the run

    def existing(self) -> RunDir:
        """This run, if its directory is there; the one "no such run" CheckpointError if not."""
        if not self.root.is_dir():
            raise CheckpointError(
                f"run directory {self.root} does not exist; train one with `mt train --run {self.root}`"
            )
        return self

    def tokenizer(self, lang: str) -> Path:
        return self.root / tokenizer_file(lang)

    def tokenizer_vocabulary(self, lang: str) -> Path:
        return self.root / vocabulary_file(lang)

    def tokenizer_settings(self, lang: str) -> Path:
        """What the tokenizer of ``lang`` was trained from, to decide whether it may be reused."""
        return self.root / f"spm.{lang}.json"

    def export(self, export_format: str, quantization: str) -> Path:
        """Where ``mt export --format FORMAT`` writes by default: ``exports/huggingface`` (float32
        weights), ``exports/argos-QUANTIZATION.argosmodel`` (a file, named as Argos's tools expect),
        else ``exports/FORMAT-QUANTIZATION``."""
        if export_format == "huggingface":
            return self.exports / "huggingface"
        if export_format == "argos":
            return self.exports / f"argos-{quantization}.argosmodel"
        return self.exports / f"{export_format}-{quantization}"

    def engine_export(self, checkpoint_sha256: str) -> Path:
        """The CTranslate2 model ``--engine ctranslate2`` makes of the checkpoint with this SHA-256
        (named by its content, so a changed checkpoint gets a new one)."""
        return self.exports / f"ctranslate2-{checkpoint_sha256[:12]}"

    def step_checkpoint(self, step: int) -> Path:
        return self.checkpoints / f"step{step:07d}.pt"

    def step_checkpoints(self) -> list[Path]:
        """Validation checkpoints kept for averaging, oldest first."""
        return sorted(self.checkpoints.glob("step*.pt"))

    def previous_training(self) -> list[Path]:
        """What an earlier training left here; tokenizers and config.yaml (from `mt prepare`) do not count."""
        return ([self.metrics] if self.metrics.exists() else []) + sorted(self.checkpoints.glob("*.pt"))

    def find_checkpoint(self, checkpoint: str | None) -> Path:
        """``None`` means best.pt; a bare name like ``last`` or ``step0001000`` is looked up in the run.

        A checkpoint that is not there is a CheckpointError that lists the ones that are.
        """
        if checkpoint is None:
            path = self.best
        elif (
            Path(checkpoint).exists()
            or Path(checkpoint).suffix == ".pt"
            and Path(checkpoint).parent != Path(".")
        ):
            return Path(checkpoint)
        else:
            path = self.checkpoints / (checkpoint if checkpoint.endswith(".pt") else f"{checkpoint}.pt")
        if not path.exists():
            names = ", ".join(p.stem for p in sorted(self.checkpoints.glob("*.pt"))) or "none"
            if checkpoint is not None:
                hint = "; give one of those names or a checkpoint file"
            elif self.last.exists():
                hint = f"; use --checkpoint last, or resume with `mt train --run {self.root} --resume`"
            else:
                hint = f"; train it with `mt train --run {self.root}`"
            raise CheckpointError(f"{path} does not exist (checkpoints in {self.checkpoints}: {names}){hint}")
        return path


class ExportFiles:
    """The files mt adds to an exported model directory so its own engines can open it."""

    CARD = "mt.json"  # the ModelCard, with the tokenizer names below
    SOURCE_SPM = "source.spm"
    TARGET_SPM = "target.spm"
    SOURCE_VOCABULARY = "source.vocab.json"  # only for an imported model's tokenizers (VocabularyTokenizer)
    TARGET_VOCABULARY = "target.vocab.json"
