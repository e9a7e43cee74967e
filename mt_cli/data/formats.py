"""Parallel text in tables: TSV, JSONL and Parquet files with named columns, read as a stream.

The format follows the file name: ``.tsv``, ``.jsonl`` (each optionally ``.gz``) or ``.parquet``.
``columns`` names the source and target column: a name, a dotted path into nested records
(``translation.de``, the schema of the Hugging Face translation datasets), or, for a TSV file
without a header row, a 0-based position (``"0"``, ``"1"``). A TSV file whose columns are named
must start with a header row. Every problem with the file itself (a missing column, a row with
too few fields, a line that is not JSON) is a DataError naming the file and the row.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from mt_cli.disk.reading import check_readable_file, open_bytes
from mt_cli.errors import DataError

Pair = tuple[str | None, str | None]  # None: the side's bytes were not UTF-8 (dropped and counted)
PARQUET_BATCH = 8192  # rows read at a time: bounded memory whatever the file's size
SUFFIXES = (".tsv", ".tsv.gz", ".jsonl", ".jsonl.gz", ".parquet")
UTF8_BOM = b"\xef\xbb\xbf"


def table_format(path: Path) -> str:
    """The format of ``path`` by its name: one of SUFFIXES without the gzip ending."""
    name = path.name.lower()
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return suffix.removesuffix(".gz").lstrip(".")
    raise DataError(f"{path}: cannot tell the table format from the name; use one of {', '.join(SUFFIXES)}")


def table_pairs(paths: Sequence[str | Path], columns: Sequence[str]) -> Iterator[Pair]:
    """The (source, target) text of every row of every file, in order."""
    readers = {"tsv": _tsv_pairs, "jsonl": _jsonl_pairs, "parquet": _parquet_pairs}
    for path in map(Path, paths):
        yield from readers[table_format(path)](path, columns)


def decoded(raw: bytes) -> str | None:
    """``raw`` as UTF-8 text, or None if it is not UTF-8 (the pair is then dropped and counted)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _without_bom(lines: Iterable[bytes]) -> Iterator[bytes]:
    """``lines`` with a UTF-8 byte-order mark removed from the first (editors on Windows add one):
    left in, it would rename the first column or start the first sentence."""
    for number, line in enumerate(lines):
        yield line.removeprefix(UTF8_BOM) if number == 0 else line


def _tsv_pairs(path: Path, columns: Sequence[str]) -> Iterator[Pair]:
    with open_bytes(path) as handle:
        lines = (line.rstrip(b"\r\n") for line in _without_bom(handle))
        if all(column.isdigit() for column in columns):
            positions, first_row = [int(column) for column in columns], 1
        else:
            header = next(lines, b"").decode("utf-8", errors="replace").split("\t")
            missing = [column for column in columns if column not in header]
            if missing:
                raise DataError(
                    f"{path}: no column {missing[0]!r} in the header row ({', '.join(header)}); "
                    "name columns from it, or give 0-based positions for a file without a header"
                )
            positions, first_row = [header.index(column) for column in columns], 2
        for row, line in enumerate(lines, start=first_row):
            fields = line.split(b"\t")
            if len(fields) <= max(positions):
                raise DataError(
                    f"{path}, line {row}: {len(fields)} tab-separated fields, but column "
                    f"{max(positions)} (0-based) is needed"
                )
            yield decoded(fields[positions[0]]), decoded(fields[positions[1]])


def _field(record: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(record, dict) or key not in record:
            raise KeyError(dotted)
        record = record[key]
    return record


def _jsonl_pairs(path: Path, columns: Sequence[str]) -> Iterator[Pair]:
    with open_bytes(path) as handle:
        for row, raw in enumerate(_without_bom(handle), start=1):
            if not raw.strip():
                continue
            text = decoded(raw)
            if text is None:
                yield None, None
                continue
            try:
                record = json.loads(text)
                values = [_field(record, column) for column in columns]
            except json.JSONDecodeError as err:
                raise DataError(f"{path}, line {row}: not JSON ({err.msg})") from None
            except KeyError as err:
                raise DataError(f"{path}, line {row}: no field {err.args[0]!r}") from None
            yield _text(values[0], path, columns[0]), _text(values[1], path, columns[1])


def _parquet_pairs(path: Path, columns: Sequence[str]) -> Iterator[Pair]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_readable_file(path)
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as err:
        raise DataError(f"{path} is not a readable Parquet file ({err})") from None
    schema = parquet.schema_arrow
    top = [column.split(".")[0] for column in columns]
    missing = [column for column, name in zip(columns, top, strict=True) if name not in schema.names]
    if missing:
        raise DataError(f"{path}: no column {missing[0]!r} (columns: {', '.join(schema.names)})")
    batches = parquet.iter_batches(batch_size=PARQUET_BATCH, columns=sorted(set(top)))
    while True:
        try:  # a damaged page shows only when it is read
            batch = next(batches, None)
        except (pa.ArrowException, OSError) as err:
            raise DataError(f"{path} is damaged ({err}); copy it again") from None
        if batch is None:
            return
        rows = batch.to_pylist()
        try:
            values = [[_field(row, column) for row in rows] for column in columns]
        except KeyError as err:
            raise DataError(f"{path}: no field {err.args[0]!r} in its records") from None
        for src, tgt in zip(*values, strict=True):
            yield _text(src, path, columns[0]), _text(tgt, path, columns[1])


def _text(value: Any, path: Path, column: str) -> str:
    """A cell as text: null is an empty side (dropped and counted); any other non-string an error."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DataError(f"{path}: column {column!r} holds {type(value).__name__} values, not text")
    return value


def hub_pairs(name: str, config: str | None, split: str, columns: Sequence[str]) -> Iterator[Pair]:
    """The rows of a Hugging Face hub dataset's split, streamed (nothing is downloaded whole)."""
    import datasets

    try:
        rows = datasets.load_dataset(name, config, split=split, streaming=True)
        for row in rows:
            src, tgt = (_text(_field(row, column), Path(name), column) for column in columns)
            yield src, tgt
    except KeyError as err:
        raise DataError(f"hub dataset {name}: no field {err.args[0]!r} in its rows") from None
    except (OSError, ValueError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(
            f"hub dataset {name} (config {config}, split {split}) cannot be read: {reason}"
        ) from None
