"""Several prepared corpora in one run, drawn by weight: ``data.corpora`` (fairseq's upsampling,
OpenNMT-py's corpus weights).

``MixedCorpus`` shows the corpora as one: pair ``i`` of corpus ``k`` is global index
``starts[k] + i``, and it answers what ``PreparedCorpus`` answers (``epochs.TrainingPairs``:
widths, pieces, text, collate, the epoch's draws), so the epoch plans batch it the same way.
Each epoch draws every pair of a corpus of weight ``w`` ``floor(w)`` times, and a seeded share
``w - floor(w)`` of its pairs once more: weight 3 trains on each pair three times per epoch,
weight 0.5 on half the pairs, another half each epoch. The draws depend on (train.seed, epoch)
only, so a resumed epoch has the batches it began with.
Everything per pair is a numpy array: a draw is 8 bytes, never a Python object.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from mt_cli.data.batch import Batch, collate, source_ids, target_ids
from mt_cli.data.prepared import PreparedCorpus, offsets_of
from mt_cli.data.sampler import epoch_seed

# Added to the epoch's seed for the fractional draws, so they do not share a random stream with
# the batch shuffle (``epoch_seed(seed, epoch)``) or BPE-dropout's pools (``epoch_seed(that, k)``).
_DRAW_SALT = 0x6D6978  # "mix"


class MixedCorpus:
    """Prepared corpora seen as one, each with its weight (see the module docstring)."""

    def __init__(self, parts: Sequence[PreparedCorpus], weights: Sequence[float]) -> None:
        if len(parts) != len(weights) or not parts:
            raise ValueError(f"{len(parts)} corpora but {len(weights)} weights")
        self.parts, self.weights = list(parts), list(weights)
        self.starts = offsets_of(np.array([len(part) for part in self.parts], np.int64))
        src, tgt = zip(*(part.widths() for part in self.parts), strict=True)
        self._widths = np.concatenate(src), np.concatenate(tgt)

    def __reduce__(self):
        """DataLoader workers open each corpus anew (``PreparedCorpus.__reduce__``)."""
        return MixedCorpus, (self.parts, self.weights)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def widths(self) -> tuple[np.ndarray, np.ndarray]:
        """Per global index, the widths ``collate`` gives (``PreparedCorpus.widths``)."""
        return self._widths

    def corpus_of(self, indices: np.ndarray) -> np.ndarray:
        """Which corpus (its place in ``data.corpora``) each global index belongs to."""
        return np.searchsorted(self.starts, indices, side="right") - 1

    def _locate(self, index: int) -> tuple[PreparedCorpus, int]:
        k = int(self.corpus_of(np.int64(index)))
        return self.parts[k], index - int(self.starts[k])

    def pieces(self, side: str, index: int) -> list[int]:
        part, local = self._locate(index)
        return part.pieces(side, local)

    def text(self, side: str, index: int) -> str:
        part, local = self._locate(index)
        return part.text(side, local)

    def collate(self, indices: Sequence[int]) -> Batch:
        where = self.corpus_of(np.asarray(indices, np.int64)).tolist()
        local = [(self.parts[k], i - int(self.starts[k])) for k, i in zip(where, indices, strict=True)]
        return collate(
            [source_ids(part.pieces("src", i)) for part, i in local],
            [target_ids(part.pieces("tgt", i)) for part, i in local],
        )

    def fixed_draws(self) -> bool:
        """Whether every epoch draws the same pairs (whole weights): then its batch count is fixed."""
        return all(float(weight).is_integer() for weight in self.weights)

    def epoch_draws(self, seed: int, epoch: int) -> np.ndarray:
        """The epoch's pairs as global indices (int64, grouped by corpus; the plans shuffle them)."""
        generator = torch.Generator()
        generator.manual_seed((epoch_seed(seed, epoch) + _DRAW_SALT) % 2**63)
        drawn = []
        for part, weight, start in zip(self.parts, self.weights, self.starts[:-1].tolist(), strict=True):
            size, whole = len(part), int(weight)
            drawn.append(np.tile(np.arange(start, start + size, dtype=np.int64), whole))
            extra = round((weight - whole) * size)  # the fraction, to the nearest pair
            if extra:
                chosen = torch.randperm(size, generator=generator).numpy()[:extra]
                drawn.append(start + np.sort(chosen))
        return np.concatenate(drawn)
