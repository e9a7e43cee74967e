"""Where training stands (saved in last.pt), the metrics log, and the RNG states to resume exactly."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from mt_cli.disk.files import writing
from mt_cli.errors import CheckpointError, ConfigError, TrainingError

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter


@dataclass
class Progress:
    step: int = 0  # optimizer updates applied
    epoch: int = 0  # completed epochs
    batch_in_epoch: int = 0  # batches of the current epoch already consumed (per rank)
    elapsed: float = 0.0  # training seconds, validation included, summed over resumes
    best_metric: float = -math.inf  # val BLEU (or -val loss when BLEU is off) of best.pt
    best_step: int = 0
    stale_validations: int = 0  # validations since the last improvement
    last_validated_step: int = -1
    bad_steps: int = 0  # consecutive updates with a non-finite gradient
    skipped_steps: int = 0  # all updates skipped for a non-finite gradient
    schedule_offset: int = 0  # the parent's updates, when a warm start continues its schedule
    # Processes that trained (torchrun's WORLD_SIZE); None in a last.pt saved before mt kept it.
    world_size: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Progress:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def count_update(self, applied: bool, max_bad_steps: int) -> None:
        """Count an applied update, or a skipped one (non-finite gradient); ``max_bad_steps``
        skips in a row stop training."""
        if applied:
            self.step, self.bad_steps = self.step + 1, 0
            return
        self.bad_steps, self.skipped_steps = self.bad_steps + 1, self.skipped_steps + 1
        if self.bad_steps >= max_bad_steps:
            raise TrainingError(
                f"the gradient was not finite for {max_bad_steps} updates in a row at update "
                f"{self.step}; lower train.lr or use train.amp=bf16/off"
            )


def check_world_size(saved: int | None, now: int, path: Path) -> None:
    """A resume trains on as many processes as the run did: an update is one batch per rank (times
    ``accum_steps``), and the saved position in the epoch counts batches per rank, so another
    world size would train other updates on other batches. A last.pt that does not say (saved
    before mt kept the world size) is resumed whatever the world size."""
    if saved is not None and saved != now:
        raise CheckpointError(
            f"cannot resume {path} with {now} process(es): it was trained with {saved}; "
            f"start {saved} (torchrun --nnodes x --nproc-per-node = {saved}), or train into another --run"
        )


def epoch_bar(total: int | None, progress: Progress, quiet: bool) -> Any:
    """The progress bar of the current epoch (tqdm), from the batch it resumes at."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=progress.batch_in_epoch,
        desc=f"epoch {progress.epoch + 1}",
        disable=quiet,
        unit="upd",
        leave=False,
        dynamic_ncols=True,
    )


@dataclass
class Throughput:
    """Tokens and model FLOPs (this rank's; ``summed`` for all ranks' tokens) over a stretch of
    training, as rates."""

    peak_flops: float | None  # this device's FLOP/s (``runtime.flops``); None: MFU unknown
    data_wait_before: float = 0.0  # the trainer's seconds waited for batches when this stretch began
    tokens: int = 0
    flops: float = 0.0
    start: float = field(default_factory=time.perf_counter)

    def add(self, tokens: int, flops: float) -> None:
        self.tokens += tokens
        self.flops += flops

    def summed(self, over_ranks: Callable[[int], int]) -> Throughput:
        """This stretch with its tokens summed over the ranks (``over_ranks``, ``Distributed.sum``):
        the trainer counts its own rank's per update and sums only when it reports."""
        return replace(self, tokens=over_ranks(self.tokens))

    def exclude(self, seconds: float) -> None:
        """Leave ``seconds`` that just passed (e.g. a validation) out of the rates."""
        self.start += seconds

    def seconds(self) -> float:
        return max(time.perf_counter() - self.start, 1e-9)

    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds()

    def tflops(self) -> float:
        """Model TFLOP/s reached by this device."""
        return self.flops / self.seconds() / 1e12

    def mfu(self) -> float | None:
        """Model FLOPs utilisation: the share of the device's peak spent on the model's FLOPs."""
        return None if self.peak_flops is None else self.flops / self.seconds() / self.peak_flops

    def as_dict(self, data_wait: float) -> dict[str, float]:
        """Rates, and the seconds of this stretch spent waiting for batches (``data_wait``: the
        trainer's running total now)."""
        rates = {
            "tokens_per_s": self.tokens_per_s(),
            "tflops": self.tflops(),
            "data_wait_s": data_wait - self.data_wait_before,
        }
        mfu = self.mfu()
        return rates if mfu is None else {**rates, "mfu": mfu}

    def describe(self) -> str:
        """e.g. "8,683 tok/s | 0.17 TFLOP/s | MFU 42.1%"."""
        mfu = self.mfu()
        return f"{self.tokens_per_s():,.0f} tok/s | {self.tflops():.2f} TFLOP/s" + (
            f" | MFU {mfu:.1%}" if mfu is not None else ""
        )


def capture_rng() -> dict[str, Any]:
    """Every random state training draws from (dropout on CPU and GPUs)."""
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def ranks_rng(states: list[dict[str, Any]]) -> dict[str, Any]:
    """What last.pt keeps of the ranks' random states (``capture_rng`` of each, in rank order):
    rank 0's at the top, as a single process saves it, and under DDP every rank's in ``ranks``,
    since each rank draws its own dropout masks (over batches of other shapes)."""
    return states[0] if len(states) == 1 else {**states[0], "ranks": states}


def restore_rng(state: dict[str, Any], rank: int = 0) -> None:
    """Restore this rank's random states from what ``ranks_rng`` saved (a last.pt saved before
    mt kept every rank's gives each rank rank 0's)."""
    if "ranks" in state:
        state = state["ranks"][rank]
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# The fields of each event that TensorBoard plots, as ``event/field`` (the rest: counters, flags).
TENSORBOARD_SCALARS = {
    "train": ("loss", "lr", "grad_norm", "tokens_per_s", "tflops", "mfu"),
    "val": ("loss", "bleu", "chrf"),
}


def summary_writer() -> type[SummaryWriter]:
    """TensorBoard's writer class; ``train.run`` asks for it before any work, so a missing extra
    stops ``mt train`` at once instead of after the tokenizers and the first log interval."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ConfigError(
            'train.tensorboard: true needs the tensorboard package: pip install -e ".[tensorboard]"'
        ) from None
    return SummaryWriter


class MetricsLog:
    """``metrics.jsonl``: one JSON object per event, appended and flushed at once; with a
    ``tensorboard`` directory the same values also go to TensorBoard event files there."""

    def __init__(self, path: Path, enabled: bool = True, tensorboard: Path | None = None):
        self.path, self.enabled, self.tensorboard = path, enabled, tensorboard
        self.board: SummaryWriter | None = None

    def write(self, event: str, **values: Any) -> None:
        if not self.enabled:
            return
        record = {"event": event, "time": round(time.time(), 3)}
        record.update({k: round(v, 6) if isinstance(v, float) else v for k, v in values.items()})
        with writing(self.path), self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        if self.tensorboard is not None:
            with writing(self.tensorboard):  # the writer thread's OSError comes back at flush()
                self._plot(event, record)

    def _plot(self, event: str, record: dict[str, Any]) -> None:
        """The rounded values of ``metrics.jsonl``, so both say the same; NaN (BLEU with
        ``val_bleu`` off) and absent fields (MFU on an unknown device) are left out."""
        if self.board is None:
            # Opened at the first event: a resumed run repeats the updates after last.pt, and
            # purge_step hides what the interrupted run logged from there on (no folded curves).
            self.board = summary_writer()(log_dir=str(self.tensorboard), purge_step=record["step"])
        for name in TENSORBOARD_SCALARS.get(event, ()):  # an event not listed there is not plotted
            if name in record and math.isfinite(record[name]):
                self.board.add_scalar(f"{event}/{name}", record[name], record["step"], record["time"])
        self.board.flush()  # a live view, and nothing lost if the process dies

    def close(self) -> None:
        if self.board is not None:
            self.board.close()
            self.board = None


class LogFile:
    """A log function that also appends each line, timestamped, to a file (``RUN/train.log``)."""

    def __init__(self, path: Path, echo: Callable[[str], None]):
        self.path, self.echo = path, echo

    def __call__(self, message: str) -> None:
        self.echo(message)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with writing(self.path), self.path.open("a", encoding="utf-8") as handle:
            handle.write("".join(f"{stamp} {line}\n" for line in message.splitlines() or [""]))
