"""Figures: the cross-attention heatmap of ``mt translate --attention`` and the curves of ``mt plot``.

matplotlib is imported inside the functions, and only its object-oriented API with the Agg canvas
is used (no pyplot, no global backend switch). Files are written to a temporary name next to the
target and then renamed, so a reader never sees half a PNG.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from mt_cli.disk.files import atomic_write_bytes
from mt_cli.disk.layout import RunDir
from mt_cli.errors import InputError
from mt_cli.specials import WORD_START

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

CONTINUATION = "\u00b7"  # "·" marks a piece that continues the previous word
ROW_SUM_TOLERANCE = 1e-2  # attention computed under bf16 autocast sums to 1 only to ~3 digits
DPI = 150


def piece_label(piece: str) -> str:
    """A readable axis label: "▁Hund" -> "Hund", "uft" -> "·uft", "." -> ".", a lone "▁" -> "␣"."""
    if piece.startswith("<") and piece.endswith(">"):
        return piece  # </s>, <unk>
    if piece == WORD_START:
        return "\u2423"
    if piece.startswith(WORD_START):
        return piece[len(WORD_START) :]
    if not any(c.isalnum() for c in piece):
        return piece  # punctuation: "·." would read as another symbol
    return CONTINUATION + piece


def _save(fig: Figure, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    atomic_write_bytes(path, lambda handle: fig.savefig(handle, format="png", dpi=DPI))


def plot_attention(src_pieces: list[str], tgt_pieces: list[str], weights: torch.Tensor, path: Path) -> None:
    """Heatmap of cross-attention ``weights`` (T, S): target pieces down, source pieces across.

    Rows must be distributions over the source (sum to 1): one row per target piece.
    """
    from matplotlib.figure import Figure
    from mpl_toolkits.axes_grid1 import make_axes_locatable

    weights = _checked_attention(src_pieces, tgt_pieces, weights)
    n_tgt, n_src = weights.shape
    # About 0.34 inch per cell, plus room for the labels and the colorbar; never tiny.
    width = 2.4 + 0.34 * n_src + 0.06 * max(len(p) for p in tgt_pieces)
    height = 1.7 + 0.34 * n_tgt + 0.05 * max(len(p) for p in src_pieces)
    fig = Figure(figsize=(max(width, 4.0), max(height, 3.0)))
    ax = fig.add_subplot()
    image = ax.imshow(
        weights.numpy(),
        cmap="Blues",
        vmin=0.0,
        vmax=max(float(weights.max()), 1e-6),
        aspect="equal",
        interpolation="nearest",
    )
    ax.set_xticks(
        range(n_src),
        [piece_label(p) for p in src_pieces],
        rotation=60,
        ha="right",
        rotation_mode="anchor",
        fontsize=10,
    )
    ax.set_yticks(range(n_tgt), [piece_label(p) for p in tgt_pieces], fontsize=10)
    ax.set_xlabel("source")
    ax.set_ylabel("target (generated)")
    ax.set_xticks([x - 0.5 for x in range(1, n_src)], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, n_tgt)], minor=True)
    ax.grid(which="minor", color="white", linewidth=0.6)
    ax.tick_params(which="minor", length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    cax = make_axes_locatable(ax).append_axes("right", size=0.16, pad=0.12)  # as tall as the heatmap
    colorbar = fig.colorbar(image, cax=cax)
    colorbar.set_label("attention weight")
    colorbar.outline.set_visible(False)
    title = "Cross-attention, last decoder layer (mean over heads)"
    ax.set_title(title if n_src >= 8 else title.replace(", ", ",\n"), fontsize=10)
    fig.tight_layout()
    _save(fig, Path(path))


def _checked_attention(src_pieces: list[str], tgt_pieces: list[str], weights: torch.Tensor) -> torch.Tensor:
    """``weights`` as an fp32 CPU tensor, or a ValueError unless its rows are distributions."""
    weights = torch.as_tensor(weights).detach().float().cpu()
    if weights.dim() != 2 or tuple(weights.shape) != (len(tgt_pieces), len(src_pieces)):
        raise ValueError(
            f"attention weights have shape {tuple(weights.shape)}, "
            f"expected ({len(tgt_pieces)}, {len(src_pieces)}) "
            "= (target pieces, source pieces)"
        )
    if not len(src_pieces) or not len(tgt_pieces):
        raise ValueError("attention plot needs at least one source and one target piece")
    sums = weights.sum(-1)
    if (
        not bool(torch.isfinite(weights).all())
        or bool((weights < 0).any())
        or not torch.allclose(sums, torch.ones_like(sums), atol=ROW_SUM_TOLERANCE, rtol=0)
    ):
        worst = float((sums - 1).abs().nan_to_num(math.inf).max())
        raise ValueError(
            f"attention rows must be non-negative and sum to 1 (worst row is off by {worst:.3g})"
        )

    return weights


# ------------------------------------------------------------------------------- curves


def read_metrics(run_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train events, val events) of RUN/metrics.jsonl, one per step (the latest wins after a
    resume), in step order. A line cut short by a crash is skipped."""
    path = RunDir(Path(run_dir)).metrics
    if not path.is_file():
        where = "does not exist" if not Path(run_dir).is_dir() else f"has no {path.name}"
        raise InputError(f"{run_dir} {where}; `mt plot` needs a run directory written by `mt train`")
    events: dict[str, dict[int, dict[str, Any]]] = {"train": {}, "val": {}}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("event") in events and isinstance(record.get("step"), int):
            events[record["event"]][record["step"]] = record
    train, val = ([by_step[s] for s in sorted(by_step)] for by_step in events.values())
    if not train:
        raise InputError(
            f"{path} has no training events yet; train longer (train.log_every_steps) and plot again"
        )
    return train, val


def _series(events: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    pairs = [(e["step"], float(e[key])) for e in events if isinstance(e.get(key), (int, float))]
    pairs = [(s, v) for s, v in pairs if math.isfinite(v)]
    return [s for s, _ in pairs], [v for _, v in pairs]


def plot_curves(run_dir: Path, output: Path | None = None) -> Path:
    """Training curves of a run into one PNG (default RUN/curves.png); returns the path."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    run_dir = Path(run_dir)
    train, val = read_metrics(run_dir)
    output = Path(output) if output is not None else RunDir(run_dir).curves
    fig = Figure(figsize=(10, 6.6))
    (loss_ax, bleu_ax), (lr_ax, speed_ax) = fig.subplots(2, 2, sharex=True)

    _loss_panel(loss_ax, train, val)
    _bleu_panel(bleu_ax, val)
    _line_panel(lr_ax, train, "lr", "learning rate", "Learning rate")
    lr_ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    _line_panel(speed_ax, train, "tokens_per_s", "tokens / s (source + target)", "Throughput")
    speed_ax.set_ylim(bottom=0)
    speed_ax.yaxis.set_major_formatter(EngFormatter(sep=""))

    for ax in (loss_ax, bleu_ax, lr_ax, speed_ax):
        ax.grid(True, color="0.9", linewidth=0.8)
        ax.spines[["top", "right"]].set_visible(False)
    for ax in (lr_ax, speed_ax):
        ax.set_xlabel("updates")
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    fig.suptitle(f"Training curves: {run_dir.resolve().name}", fontsize=12)
    fig.tight_layout()
    _save(fig, output)
    return output


BLUE, ORANGE, GREEN = "#1f77b4", "#d62728", "#2ca02c"


def _loss_panel(ax: Axes, train: list[dict[str, Any]], val: list[dict[str, Any]]) -> None:
    ax.plot(*_series(train, "loss"), color=BLUE, linewidth=1.2, label="train (label-smoothed)")
    ax.plot(
        *_series(val, "loss"),
        color=ORANGE,
        marker="o",
        markersize=3.5,
        linewidth=1.4,
        label="validation (NLL)",
    )
    ax.set_ylabel("loss per target token (nats)")
    ax.set_title("Loss")
    ax.legend(frameon=False)


def _bleu_panel(ax: Axes, val: list[dict[str, Any]]) -> None:
    steps, bleu = _series(val, "bleu")
    if bleu:
        ax.plot(steps, bleu, color=GREEN, marker="o", markersize=3.5, linewidth=1.4)
        best = max(range(len(bleu)), key=bleu.__getitem__)
        ax.annotate(
            f"best {bleu[best]:.2f}",
            (steps[best], bleu[best]),
            xytext=(0, 8),
            textcoords="offset points",
            ha="center",
            fontsize=9,
        )
        ax.margins(y=0.15)
    else:
        ax.text(
            0.5,
            0.5,
            "no validation BLEU\n(train.val_bleu=false, or no validation yet)",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="0.4",
        )
        ax.set_yticks([])
    ax.set_ylabel("BLEU (greedy, val)")
    ax.set_title("Validation BLEU")


def _line_panel(ax: Axes, events: list[dict[str, Any]], key: str, ylabel: str, title: str) -> None:
    ax.plot(*_series(events, key), color=BLUE, linewidth=1.2)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
