"""The resumable loader: this rank's batches, epoch after epoch, built ahead of the training step
by ``data.workers`` processes, and resumed mid-epoch at the sampler position a checkpoint saved.

An epoch is a list of *units* of work, fixed by (train.seed, epoch) before it starts; a plan
(``EpochPlan``, made by ``epochs.epoch_plan``) turns one unit into this rank's padded batches.
``EpochLoader`` runs the plan's ``load`` in DataLoader processes (0: in the training process), in
order, so the batches do not depend on the number of workers, and a resumed epoch gets exactly
the batches it began with: of a checkpoint, the loader needs only (epoch, batch in epoch).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import torch

from mt_cli.data.batch import Batch
from mt_cli.errors import MtError


class EpochPlan(Protocol):
    """What the loader runs: ``epochs.FixedBatches`` and ``epochs.DropoutBatches``."""

    def units(self, epoch: int) -> list[Any]:
        """The epoch's units of work, in training order (picklable: they go to the workers)."""
        ...

    def load(self, unit: Any) -> Iterable[Batch]:
        """This rank's batches of one unit (runs in a worker process; iterated in the training one)."""
        ...

    def resume(self, units: list[Any], start: int) -> tuple[list[Any], int]:
        """To go on from batch ``start``: the units still to load, and how many of their first
        batches to drop."""
        ...

    def length(self) -> int | None:
        """Batches per epoch for this rank, where known before the epoch is built."""
        ...


class _Units(torch.utils.data.Dataset):
    """What a worker holds: the plan. The DataLoader's "index" is (epoch, unit) itself."""

    def __init__(self, plan: EpochPlan) -> None:
        self.plan = plan

    def __getitem__(self, key: tuple[int, Any]) -> tuple[int, Iterable[Batch] | MtError]:
        epoch, unit = key
        try:
            return epoch, self.plan.load(unit)
        except MtError as err:  # raised again as itself in the training process: one line, its exit code
            return epoch, err


class _Schedule(torch.utils.data.Sampler):
    """(epoch, unit) from a position on, epoch after epoch without end: the workers run on into
    the next epoch while the last batches of this one train, so no epoch starts by waiting."""

    def __init__(self, plan: EpochPlan, epoch: int, units: list[Any]) -> None:
        self.plan, self.epoch, self.units = plan, epoch, units  # units: what is left of ``epoch``

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        units = self.units
        for epoch in itertools.count(self.epoch):
            yield from ((epoch, unit) for unit in units)
            units = self.plan.units(epoch + 1)


def _as_loaded(loaded: tuple[int, Any]) -> tuple[int, Any]:
    return loaded


class EpochLoader:
    """This rank's batches, epoch by epoch, loaded by ``workers`` processes ahead of the training
    step (they open the prepared corpus anew: ``PreparedCorpus.__reduce__``)."""

    def __init__(self, plan: EpochPlan, workers: int, seed: int) -> None:
        self.plan, self.workers, self.seed = plan, workers, seed
        self._stream: Iterator[tuple[int, Batch]] | None = None
        self._held: tuple[int, Batch] | None = None  # the first batch of the next epoch, once read
        self._position: tuple[int, int] | None = None  # where the stream stands: (epoch, batch)

    def batches(self, epoch: int, start: int = 0) -> Iterator[Batch]:
        """The batches of ``epoch`` from batch ``start`` on (the ones before it were trained on)."""
        if self._stream is None or self._position != (epoch, start):
            self._stream, self._held = self._open(epoch, start), None
        while True:
            item = self._held if self._held is not None else next(self._stream)
            self._held = None
            if item[0] != epoch:
                self._held, self._position = item, (item[0], 0)
                return
            start += 1
            self._position = (epoch, start)
            yield item[1]

    def _open(self, epoch: int, start: int) -> Iterator[tuple[int, Batch]]:
        units, skip = self.plan.resume(self.plan.units(epoch), start)
        generator = torch.Generator()  # the loader draws its worker seeds here, not from training's RNG
        generator.manual_seed(self.seed)
        loader = torch.utils.data.DataLoader(
            _Units(self.plan),
            batch_size=None,
            sampler=_Schedule(self.plan, epoch, units),
            num_workers=self.workers,
            collate_fn=_as_loaded,
            generator=generator,
        )
        for unit_epoch, loaded in loader:
            if isinstance(loaded, MtError):
                raise loaded
            for batch in loaded:
                if skip:
                    skip -= 1
                    continue
                yield unit_epoch, batch
