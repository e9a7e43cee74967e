"""Each rank's share of a translation (``train.backtranslation``).

Under torchrun every rank translates part of a text, on its own device, rather than rank 0 all
of it while the others wait: a wait that long would run past the process group's timeout, and
the other devices would sit idle. The text is cut into chunks of ``CHUNK`` lines from its first
line, the cuts a single process makes; the chunks no kept chunk holds (``synthetic.Partial``:
an interrupted run, on any number of ranks, leaves whole chunks with gaps between them) are
dealt in turn, the i-th to rank i mod world_size, so no rank has more than one chunk more than
another. Each rank keeps its chunks in the shared ``.partial`` folder; rank 0 writes the cache
folder from them once all are kept.

Why whole chunks, not every world_size-th line: a chunk is one translate call, sorted by length
into batches, and a score's last bits depend on the batch a line is decoded in (the words do not:
fp32 decoding, a sampled line seeded by itself). The same chunks give the bytes a single process
writes, for any number of ranks. The price: a text of one chunk (10,000 lines) is rank 0's alone.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

Span = tuple[int, int]  # lines [first, end) of the text


@dataclass(frozen=True)
class Share:
    """What one rank translates of a text: its chunks, in order, and the whole it is part of."""

    chunks: list[Span]
    left: int  # lines no kept chunk holds yet, over every rank
    total: int  # lines of the text (up to train_limit)

    @property
    def lines(self) -> int:
        return sum(end - first for first, end in self.chunks)

    @property
    def kept(self) -> int:
        """Lines translated before, by any run."""
        return self.total - self.left


def share_of(kept: Sequence[Span], total: int, rank: int, world_size: int, chunk: int) -> Share:
    """Rank ``rank``'s share of the lines of [0, ``total``) that the ``kept`` spans leave out:
    every world_size-th of their chunks, cut every ``chunk`` lines from line 0.

    Every rank computes the same deal from the same kept spans, so the callers read them before
    any rank keeps a new chunk.
    """
    gaps = missing(kept, total)
    pieces = [
        (start, min(end, (start // chunk + 1) * chunk))  # to the next cut, or the gap's end
        for first, end in gaps
        for start in [first, *range((first // chunk + 1) * chunk, end, chunk)]
    ]
    return Share(pieces[rank::world_size], sum(end - first for first, end in gaps), total)


def missing(kept: Sequence[Span], total: int) -> list[Span]:
    """The spans of [0, ``total``) that no kept span covers (``kept`` in order, not overlapping)."""
    gaps, line = [], 0
    for first, end in [*kept, (total, total)]:
        if first > line:
            gaps.append((line, min(first, total)))
        line = max(line, end)
    return gaps


def lines_of(text: Iterator[str], chunks: Sequence[Span]) -> Iterator[tuple[int, list[str]]]:
    """(first line, its lines) of each chunk, in one pass over ``text`` (chunks in order)."""
    line = 0
    for first, end in chunks:
        collections.deque(itertools.islice(text, first - line), maxlen=0)  # other ranks' lines
        yield first, list(itertools.islice(text, end - first))
        line = end
