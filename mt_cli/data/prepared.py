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

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from mt_cli.data.batch import Batch, collate, source_ids, target_ids
from mt_cli.errors import CheckpointError, DataError
from mt_cli.files import temporary_directory_next_to, write_json
from mt_cli.text.tokenizer import Tokenizer

FORMAT = 2  # bump when the layout changes: older prepared corpora are then rebuilt
MANIFEST = "manifest.json"
SIDES = ("src", "tgt")


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)


def prepared_key(recipe: dict[str, Any]) -> str:
    """The directory name for a recipe: any change to the corpus, filters or tokenizers changes it."""
    text = json.dumps({"format": FORMAT, **recipe}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class Filtered:
    """What the filters dropped, by reason; the prepare report prints each count."""

    undecodable: int = 0  # a side is not UTF-8
    empty: int = 0  # a side is empty or blank
    too_long: int = 0  # a side has more than data.max_len pieces
    ratio: int = 0  # one side is more than data.max_length_ratio times longer (pieces)
    duplicate: int = 0  # the same pair (both sides) was kept earlier (data.dedupe)

    def as_dict(self) -> dict[str, int]:
        return {
            "undecodable": self.undecodable,
            "empty": self.empty,
            "too_long": self.too_long,
            "ratio": self.ratio,
            "duplicate": self.duplicate,
        }

    def describe(self) -> str:
        """e.g. "not UTF-8 0, empty 0, longer than data.max_len 12, over data.max_length_ratio 0,
        duplicate 0"."""
        return (
            f"not UTF-8 {self.undecodable:,}, empty {self.empty:,}, "
            f"longer than data.max_len {self.too_long:,}, over data.max_length_ratio {self.ratio:,}, "
            f"duplicate {self.duplicate:,}"
        )


@dataclass(frozen=True)
class PairFilter:
    """fairseq's clean-corpus rules on piece counts: at most ``max_len`` per side, and no side
    more than ``max_ratio`` times as long as the other (None: no ratio rule)."""

    max_len: int
    max_ratio: float | None

    def keep(
        self, src: Sequence[np.ndarray], tgt: Sequence[np.ndarray], texts, counts: Filtered
    ) -> np.ndarray:
        """Boolean (N,): which pairs survive; ``counts`` grows by the dropped ones, each counted once."""
        src_len = np.fromiter((len(ids) for ids in src), np.int64, len(src))
        tgt_len = np.fromiter((len(ids) for ids in tgt), np.int64, len(tgt))
        texts = list(texts)
        broken = np.fromiter((s is None or t is None for s, t in texts), bool, len(texts))
        # blank: either side empty, whitespace only or undecodable (None)
        blank = np.fromiter((not (s and s.strip() and t and t.strip()) for s, t in texts), bool, len(texts))
        long = ~blank & ((src_len > self.max_len) | (tgt_len > self.max_len))
        skewed = np.zeros_like(blank)
        if self.max_ratio is not None:
            shorter = np.maximum(np.minimum(src_len, tgt_len), 1)
            skewed = ~blank & ~long & (np.maximum(src_len, tgt_len) > self.max_ratio * shorter)
        counts.undecodable += int(broken.sum())
        counts.empty += int((blank & ~broken).sum())
        counts.too_long += int(long.sum())
        counts.ratio += int(skewed.sum())
        return ~(blank | long | skewed)


class SeenPairs:
    """Exact duplicates (both sides byte-equal), found by a 64-bit hash per kept pair: 8 bytes a
    pair in one sorted array, where a Python set would take ~80. Two different pairs share a
    hash with probability ~n^2 / 2^65 (about 2e-5 at 30M pairs): one pair wrongly dropped."""

    def __init__(self) -> None:
        self.hashes = np.zeros(0, np.uint64)  # sorted

    def first_seen(self, texts: Sequence[tuple[str, str]]) -> np.ndarray:
        """Boolean (N,): which pairs were not seen before (in earlier calls or earlier in ``texts``)."""
        hashes = np.fromiter((_pair_hash(src, tgt) for src, tgt in texts), np.uint64, len(texts))
        new = np.zeros(len(hashes), bool)
        new[np.unique(hashes, return_index=True)[1]] = True  # first occurrence within this chunk
        if len(self.hashes):
            at = np.minimum(np.searchsorted(self.hashes, hashes), len(self.hashes) - 1)
            new &= self.hashes[at] != hashes
        # Two sorted runs: the stable sort (timsort for 64-bit keys) merges them in linear time.
        self.hashes = np.sort(np.concatenate([self.hashes, np.sort(hashes[new])]), kind="stable")
        return new


def _pair_hash(src: str, tgt: str) -> int:
    data = f"{len(src)}:{src}{tgt}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def encodable(lines: list[str | None]) -> list[str]:
    """Lines to encode: an undecodable one (None) as empty (the filter drops its pair anyway)."""
    return ["" if line is None else line for line in lines]


class _Flat:
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
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.int64)
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return offsets


class _Side:
    """One side as it is written: its pieces (``.tokens``) and its text (``.text``)."""

    def __init__(self, staging: Path, side: str, dtype: np.dtype) -> None:
        self.dtype = dtype
        self.tokens = _Flat(staging / f"{side}.tokens")
        self.text = _Flat(staging / f"{side}.text")

    def append(self, pieces: Sequence[list[int]], lines: Sequence[str]) -> None:
        lengths = np.fromiter((len(ids) for ids in pieces), np.int64, len(pieces))
        ids = np.fromiter((i for ids in pieces for i in ids), self.dtype, int(lengths.sum()))
        self.tokens.append(ids.tobytes(), lengths)
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
    dedupe: bool = False,
) -> PreparedCorpus:
    """Encode ``chunks`` of text pairs (SentencePiece encodes each chunk on every core), filter,
    and write the arrays and manifest under a temporary name; rename to ``directory`` when whole.

    ``progress(n)`` is called with the number of pairs read after each chunk. With ``dedupe`` a
    pair equal to one kept before is dropped too (the other filters count first).
    """
    directory.parent.mkdir(parents=True, exist_ok=True)
    dropped, read, seen = Filtered(), 0, SeenPairs()
    try:
        with temporary_directory_next_to(directory) as staging:
            sides = {
                side: _Side(staging, side, token_dtype(tok.vocab_size))
                for side, tok in (("src", src_tok), ("tgt", tgt_tok))
            }
            try:
                for src_text, tgt_text in chunks:
                    src, tgt = src_tok.encode(encodable(src_text)), tgt_tok.encode(encodable(tgt_text))
                    kept = keep.keep(src, tgt, zip(src_text, tgt_text, strict=True), dropped).nonzero()[0]
                    if dedupe:
                        unique = seen.first_seen([(src_text[i], tgt_text[i]) for i in kept])
                        dropped.duplicate += int((~unique).sum())
                        kept = kept[unique]
                    sides["src"].append([src[i] for i in kept], [src_text[i] for i in kept])
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
                    f"every one of the {read:,} training pairs was filtered out ({dropped.describe()}); "
                    "check the corpus, data.max_len and data.max_length_ratio"
                )
            for name, side in sides.items():
                offsets[name].tofile(staging / f"{name}.offsets")
                side.text.offsets().tofile(staging / f"{name}.lines")
            manifest = {
                "format": FORMAT,
                "pairs": pairs,
                "read": read,
                "dropped": dropped.as_dict(),
                "dtype": {name: side.dtype.name for name, side in sides.items()},
                "tokens": {name: int(side_offsets[-1]) for name, side_offsets in offsets.items()},
                "recipe": recipe,
            }
            write_json(manifest, staging / MANIFEST)
            os.chmod(staging, 0o755)  # mkdtemp makes it private; a prepared corpus is shared like a dataset
            os.replace(staging, directory)
    except OSError as err:
        raise DataError(f"cannot write the prepared corpus {directory}: {err.strerror or err}") from None
    return PreparedCorpus.open(directory)


class PreparedCorpus:
    """A prepared corpus, opened read-only: the training pairs for ``FixedPairs``.

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
    def open(cls, directory: Path) -> PreparedCorpus:
        """The corpus in ``directory``; CheckpointError if its files do not add up (a damaged copy)."""
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
        return corpus

    def __len__(self) -> int:
        return self.manifest["pairs"]

    def widths(self) -> tuple[np.ndarray, np.ndarray]:
        """Per pair the widths ``collate`` gives: pieces + EOS, and BOS + pieces (decoder input)."""
        src, tgt = ((np.diff(self.offsets[side]) + 1).astype(np.int32) for side in SIDES)
        return src, tgt

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
