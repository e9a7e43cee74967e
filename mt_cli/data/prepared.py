"""The training split encoded once, on disk: per side a flat token array and an offsets array.

Layout of a prepared corpus directory (fairseq's indexed dataset, reduced to what mt needs)::

    manifest.json   format version, dtype, counts, what it was made from (the reuse key)
    src.tokens      uint16 or uint32 piece ids of every kept source, one after another
    src.offsets     int64, len(pairs) + 1: pair i's pieces are tokens[offsets[i]:offsets[i + 1]]
    src.text        the same sources as UTF-8 text, one after another (BPE-dropout segments it anew)
    src.lines       int64, len(pairs) + 1: byte offsets of each source line in src.text
    tgt.*           the same four for the targets

Pieces are stored without specials; ``collate`` adds EOS (and BOS) as ``batch.source_ids`` and
``batch.target_ids`` do. The directory is built under a temporary name and renamed when whole,
so a prepared corpus that exists is complete; a crash, a full disk or Ctrl-C leaves nothing that
could be reused. Training maps the offsets and reads each batch's ids with ``os.pread``: the
pages stay in the operating system's cache, shared by every rank, never in a process's heap.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from mt_cli.data.batch import Batch, collate, source_ids, target_ids
from mt_cli.data.filters import Filtered, PairFilter, SeenPairs, encodable
from mt_cli.disk.files import json_digest, temporary_directory_next_to, write_json, writing
from mt_cli.errors import CheckpointError, DataError
from mt_cli.text.tokenizer import Tokenizer

FORMAT = 2  # bump when the layout changes: older prepared corpora are then rebuilt
MANIFEST = "manifest.json"
SIDES = ("src", "tgt")


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)


def prepared_key(recipe: dict[str, Any]) -> str:
    """The directory name for a recipe: any change to the corpus, filters or tokenizers changes it."""
    return json_digest({"format": FORMAT, **recipe})


@dataclass(frozen=True)
class Flat:
    """Sequences of ids in one array: sequence i is ``ids[offsets[i]:offsets[i + 1]]``."""

    ids: np.ndarray
    offsets: np.ndarray  # int64, len + 1

    @classmethod
    def of(cls, sequences: Sequence[list[int]], dtype: np.dtype | type = np.int32) -> Flat:
        offsets = offsets_of(np.fromiter(map(len, sequences), np.int64, len(sequences)))
        return cls(np.fromiter((i for ids in sequences for i in ids), dtype, int(offsets[-1])), offsets)

    @classmethod
    def concat(cls, parts: list[Flat]) -> Flat:
        starts = np.cumsum([0] + [len(part.ids) for part in parts[:-1]])
        offsets = [parts[0].offsets[:1]] + [part.offsets[1:] + start for part, start in zip(parts, starts)]
        return cls(np.concatenate([part.ids for part in parts]), np.concatenate(offsets))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def widths(self) -> np.ndarray:
        """(N,) int32: the length of each sequence."""
        return np.diff(self.offsets).astype(np.int32)

    def __getitem__(self, index: int) -> list[int]:
        return self.ids[self.offsets[index] : self.offsets[index + 1]].tolist()


def offsets_of(lengths: np.ndarray) -> np.ndarray:
    """(N + 1,) int64: where each of N items of these lengths starts, one after another, and the end."""
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


class _FlatFile:
    """A flat file of items appended one after another, and the length of every item."""

    def __init__(self, path: Path) -> None:
        self.handle: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.lengths: list[np.ndarray] = []

    def append(self, data: bytes, lengths: np.ndarray) -> None:
        self.handle.write(data)
        self.lengths.append(lengths)

    def close(self) -> None:
        with self.handle:
            self.handle.flush()
            os.fsync(self.handle.fileno())

    def offsets(self) -> np.ndarray:
        """(items + 1,) int64: where each item starts, and the end of the last."""
        return offsets_of(np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.int64))


class _Side:
    """One side as it is written: its pieces (``.tokens``) and its text (``.text``)."""

    def __init__(self, staging: Path, side: str, dtype: np.dtype) -> None:
        self.dtype = dtype
        self.tokens = _FlatFile(staging / f"{side}.tokens")
        self.text = _FlatFile(staging / f"{side}.text")

    def append(self, pieces: Sequence[list[int]], lines: Sequence[str]) -> None:
        flat = Flat.of(pieces, self.dtype)
        self.tokens.append(flat.ids.tobytes(), np.diff(flat.offsets))
        encoded = [line.encode("utf-8") for line in lines]
        self.text.append(b"".join(encoded), np.fromiter(map(len, encoded), np.int64, len(encoded)))

    def close(self) -> None:
        self.tokens.close()
        self.text.close()


def write_prepared(
    directory: Path,
    chunks: Iterable[tuple[list[str | None], list[str | None]]],
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    keep: PairFilter,
    recipe: dict[str, Any],
    progress: Callable[[int], None] = lambda pairs: None,
    prefix: str = "",
    dropped: Filtered | None = None,
) -> PreparedCorpus:
    """Encode ``chunks`` of text pairs (SentencePiece encodes each chunk on every core), filter,
    and write the arrays and manifest under a temporary name; rename to ``directory`` when whole.

    ``prefix`` (the corpus's tags, ``text.tags.corpus_prefix``) goes before every source: in its
    pieces and in its saved text, which BPE-dropout segments anew. The filters judge the text as
    read (a blank source stays blank) and the pieces as the model sees them (tags counted).
    ``progress(n)`` is called with the number of pairs read after each chunk. ``dropped`` counts
    what the filters drop; the pairs it holds already were dropped before they came here (under a
    translated corpus's ``min_score``) and count as read.
    """
    dropped = Filtered() if dropped is None else dropped
    read, seen = 0, SeenPairs()
    # A failed write (disk full, read-only) is a RunFailure naming the corpus; reading the pairs
    # raises DataError, never OSError (reading.open_bytes), so it is not mistaken for one.
    with writing(directory):
        directory.parent.mkdir(parents=True, exist_ok=True)
        with temporary_directory_next_to(directory) as staging:
            sides = {
                side: _Side(staging, side, token_dtype(tok.vocab_size))
                for side, tok in (("src", src_tok), ("tgt", tgt_tok))
            }
            try:
                for src_text, tgt_text in chunks:
                    src_in = [prefix + line for line in encodable(src_text)]  # "" + line: the line itself
                    src, tgt = src_tok.encode(src_in), tgt_tok.encode(encodable(tgt_text))
                    kept = keep.keep(src, tgt, zip(src_text, tgt_text, strict=True), dropped).nonzero()[0]
                    if keep.dedupe:
                        unique = seen.first_seen([(src_text[i], tgt_text[i]) for i in kept])
                        dropped.duplicate += int((~unique).sum())
                        kept = kept[unique]
                    sides["src"].append([src[i] for i in kept], [src_in[i] for i in kept])
                    sides["tgt"].append([tgt[i] for i in kept], [tgt_text[i] for i in kept])
                    read += len(src_text)
                    progress(len(src_text))
            finally:
                for side in sides.values():
                    side.close()
            offsets = {name: side.tokens.offsets() for name, side in sides.items()}
            pairs = len(offsets["src"]) - 1
            if pairs == 0:
                raise DataError(
                    f"every one of the {read + dropped.score:,} training pairs was filtered out "
                    f"({dropped.describe()}); check the corpus, data.max_len, max_length_ratio and min_score"
                )
            for name, side in sides.items():
                offsets[name].tofile(staging / f"{name}.offsets")
                side.text.offsets().tofile(staging / f"{name}.lines")
            manifest = {
                "format": FORMAT,
                "pairs": pairs,
                "read": read + dropped.score,
                "dropped": dropped.as_dict(),
                "dtype": {name: side.dtype.name for name, side in sides.items()},
                "tokens": {name: int(side_offsets[-1]) for name, side_offsets in offsets.items()},
                "recipe": recipe,
            }
            write_json(manifest, staging / MANIFEST)
            os.chmod(staging, 0o755)  # mkdtemp makes it private; a prepared corpus is shared like a dataset
            os.replace(staging, directory)
    return PreparedCorpus.open(directory)


class PreparedCorpus:
    """A prepared corpus, opened read-only: the training pairs that ``epochs.FixedBatches``
    and ``epochs.DropoutBatches`` batch (it is an ``epochs.TrainingPairs``).

    ``widths`` and ``collate`` are those of ``dataset.EncodedPairs``, so the sampler and the
    training loop cannot tell the two apart. The offsets are memory-mapped; a batch's pieces are
    read with ``os.pread``, not through a map: pages of a mapped file that a process has touched
    count in its resident memory, so random batches over a big corpus would make a training
    process look as large as the corpus (the reads come from the page cache all the same).
    """

    def __init__(self, directory: Path, manifest: dict[str, Any]) -> None:
        self.directory, self.manifest = directory, manifest
        self.offsets = {side: _offsets(directory / f"{side}.offsets") for side in SIDES}
        self.lines = {side: _offsets(directory / f"{side}.lines") for side in SIDES}
        self.dtypes = {side: np.dtype(manifest["dtype"][side]) for side in SIDES}
        self._tokens = {side: open(directory / f"{side}.tokens", "rb") for side in SIDES}  # noqa: SIM115
        self._text = {side: open(directory / f"{side}.text", "rb") for side in SIDES}  # noqa: SIM115

    def __reduce__(self):
        """DataLoader workers open the files anew (fairseq's indexed dataset does the same)."""
        return PreparedCorpus.open, (self.directory,)

    @classmethod
    def open(cls, directory: Path, vocab_sizes: tuple[int, int] | None = None) -> PreparedCorpus:
        """The corpus in ``directory``; CheckpointError if its files do not add up (a damaged copy)
        or, given the (source, target) ``vocab_sizes``, if a piece id is outside its vocabulary."""
        try:
            manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
            corpus = cls(directory, manifest)
            sizes = {side: (_size(corpus._tokens[side]), _size(corpus._text[side])) for side in SIDES}
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise CheckpointError(
                f"prepared corpus {directory} is unreadable ({err}); delete it and rerun `mt prepare`"
            ) from None
        for side in SIDES:
            offsets, lines = corpus.offsets[side], corpus.lines[side]
            whole = len(offsets) == len(lines) == manifest["pairs"] + 1
            expected = (int(offsets[-1]) * corpus.dtypes[side].itemsize, int(lines[-1]))
            if not whole or expected != sizes[side]:
                raise CheckpointError(
                    f"prepared corpus {directory} is damaged ({side} arrays do not match its manifest); "
                    "delete it and rerun `mt prepare`"
                )
        if vocab_sizes is not None:
            corpus.check_ids(dict(zip(SIDES, vocab_sizes)))
        return corpus

    def check_ids(self, vocab_sizes: dict[str, int]) -> None:
        """CheckpointError naming the file if a side holds a piece id its vocabulary lacks (a copy
        damaged in place, the same size); one pass over the mapped ids, ~0.1 s per 100M pieces."""
        for side in SIDES:
            path = self.directory / f"{side}.tokens"
            if os.path.getsize(path) == 0:
                continue
            largest = int(np.memmap(path, dtype=self.dtypes[side], mode="r").max())
            if largest >= vocab_sizes[side]:
                raise CheckpointError(
                    f"prepared corpus file {path} is damaged (piece id {largest} in a vocabulary of "
                    f"{vocab_sizes[side]}); delete {self.directory} and rerun `mt prepare`"
                )

    def __len__(self) -> int:
        return self.manifest["pairs"]

    def widths(self) -> tuple[np.ndarray, np.ndarray]:
        """Per pair the widths ``collate`` gives: pieces + EOS, and BOS + pieces (decoder input)."""
        src, tgt = ((np.diff(self.offsets[side]) + 1).astype(np.int32) for side in SIDES)
        return src, tgt

    def epoch_draws(self, seed: int, epoch: int) -> np.ndarray:
        """Every pair once, whatever the seed and epoch (the plans shuffle them)."""
        return np.arange(len(self), dtype=np.int64)

    def fixed_draws(self) -> bool:
        """True: every epoch draws the same pairs."""
        return True

    def pieces(self, side: str, index: int) -> list[int]:
        """Pair ``index``'s piece ids on ``side`` ("src" or "tgt"), without specials."""
        dtype = self.dtypes[side]
        data = _read(self._tokens[side], self.offsets[side], index, dtype.itemsize)
        return np.frombuffer(data, dtype).tolist()

    def text(self, side: str, index: int) -> str:
        """Pair ``index``'s line on ``side``, as it was read."""
        return _read(self._text[side], self.lines[side], index, 1).decode("utf-8")

    def collate(self, indices: Sequence[int]) -> Batch:
        return collate(
            [source_ids(self.pieces("src", i)) for i in indices],
            [target_ids(self.pieces("tgt", i)) for i in indices],
        )


def _size(handle: BinaryIO) -> int:
    """Bytes in an open file."""
    return os.fstat(handle.fileno()).st_size


def _offsets(path: Path) -> np.ndarray:
    return np.memmap(path, dtype=np.int64, mode="r")


def _read(handle: BinaryIO, offsets: np.ndarray, index: int, itemsize: int) -> bytes:
    """Item ``index`` of a flat file, by its offsets (in items of ``itemsize`` bytes)."""
    start, end = (int(offset) for offset in offsets[index : index + 2])
    return os.pread(handle.fileno(), (end - start) * itemsize, start * itemsize)
