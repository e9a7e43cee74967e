"""Tables (TSV, JSONL, Parquet; gzip; several files per split) and hub datasets as corpus sources."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import CONFIGS, FAST_TRAINING, TinyCorpus, quiet

from mt_cli.config.recipe import load_config
from mt_cli.config.sections import DataConfig
from mt_cli.data.corpus import load_corpus, train_fingerprint, train_pairs
from mt_cli.data.formats import hub_pairs, table_pairs
from mt_cli.data.prepare import prepare_corpus
from mt_cli.errors import DataError

DE = ["Ein Hund läuft.", "Zwei Katzen 🐈 schlafen.", "Ein Mann."]
EN = ["A dog runs.", "Two cats 🐈 sleep.", "A man."]


def write_tsv(path: Path, rows: list[list[str]]) -> Path:
    text = "".join("\t".join(row) + "\n" for row in rows).encode("utf-8")
    path.write_bytes(gzip.compress(text) if path.name.endswith(".gz") else text)
    return path


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def translation_records(de: list[str], en: list[str]) -> list[dict]:
    """The schema of the Hugging Face translation datasets (wmt14, opus_books, ...)."""
    return [{"translation": {"de": d, "en": e}} for d, e in zip(de, en, strict=True)]


def test_tsv_with_a_header_without_one_and_gzipped(tmp_path: Path) -> None:
    named = write_tsv(
        tmp_path / "a.tsv", [["id", "en", "de"], *[["7", e, d] for d, e in zip(DE, EN, strict=True)]]
    )
    positional = write_tsv(tmp_path / "b.tsv.gz", [[d, e] for d, e in zip(DE, EN, strict=True)])
    assert list(table_pairs([named], ["de", "en"])) == list(zip(DE, EN, strict=True))
    assert list(table_pairs([positional], ["0", "1"])) == list(zip(DE, EN, strict=True))


def test_a_byte_order_mark_is_neither_in_the_header_nor_in_the_first_sentence(tmp_path: Path) -> None:
    bom = "\ufeff".encode()
    named = write_tsv(tmp_path / "named.tsv", [["de", "en"], *[[d, e] for d, e in zip(DE, EN, strict=True)]])
    positional = write_tsv(tmp_path / "positional.tsv.gz", [[d, e] for d, e in zip(DE, EN, strict=True)])
    positional.write_bytes(gzip.compress(bom + gzip.decompress(positional.read_bytes())))
    jsonl = write_jsonl(tmp_path / "a.jsonl", translation_records(DE, EN))
    for path in (named, jsonl):
        path.write_bytes(bom + path.read_bytes())
    assert list(table_pairs([named], ["de", "en"])) == list(zip(DE, EN, strict=True))
    assert list(table_pairs([positional], ["0", "1"])) == list(zip(DE, EN, strict=True))
    assert list(table_pairs([jsonl], ["translation.de", "translation.en"])) == list(zip(DE, EN, strict=True))
    assert (
        list(table_pairs([named, named], ["de", "en"])) == list(zip(DE, EN, strict=True)) * 2
    )  # each file's


def test_a_damaged_table_is_one_line_naming_it(tmp_path: Path) -> None:
    tsv = write_tsv(tmp_path / "a.tsv.gz", [[d, e] for d, e in zip(DE * 500, EN * 500, strict=True)])
    tsv.write_bytes(tsv.read_bytes()[:-12])
    with pytest.raises(DataError, match=f"^{tsv} is truncated"):
        list(table_pairs([tsv], ["0", "1"]))
    parquet = tmp_path / "b.parquet"
    pq.write_table(pa.table({"de": DE * 1000, "en": EN * 1000}), parquet, compression="none")
    data = bytearray(parquet.read_bytes())
    data[100:400] = bytes(300)  # the first data page: the footer (and so the schema) stays readable
    parquet.write_bytes(bytes(data))
    with pytest.raises(DataError, match=f"^{parquet} is damaged"):
        list(table_pairs([parquet], ["de", "en"]))


def test_jsonl_and_parquet_with_nested_fields(tmp_path: Path) -> None:
    jsonl = write_jsonl(tmp_path / "a.jsonl", translation_records(DE, EN))
    parquet = tmp_path / "b.parquet"
    pq.write_table(pa.Table.from_pylist(translation_records(DE[:2], EN[:2])), parquet)
    flat = tmp_path / "c.parquet"
    pq.write_table(pa.table({"src": DE, "tgt": EN, "score": [0.1, 0.2, 0.3]}), flat)
    nested = ["translation.de", "translation.en"]
    assert list(table_pairs([jsonl, parquet], nested)) == list(zip(DE + DE[:2], EN + EN[:2], strict=True))
    assert list(table_pairs([flat], ["src", "tgt"])) == list(zip(DE, EN, strict=True))


def test_a_table_source_gives_every_split_from_several_files(tmp_path: Path) -> None:
    train = [write_jsonl(tmp_path / f"train{i}.jsonl", translation_records(DE, EN)) for i in range(2)]
    val = tmp_path / "val.parquet"
    pq.write_table(pa.Table.from_pylist(translation_records(DE[:2], EN[:2])), val)
    tables = {"train": [str(p) for p in train], "val": [str(val)]}
    cfg = DataConfig(
        source="table", tables=tables, columns=["translation.de", "translation.en"], train_limit=5
    )
    assert list(train_pairs(cfg)) == list(zip(DE + DE[:2], EN + EN[:2], strict=True))
    corpus = load_corpus(cfg)
    assert {name: len(split) for name, split in corpus.items()} == {"train": 5, "val": 2}
    with pytest.raises(
        DataError, match="split test2016 is not in the corpus from data.tables; available: train, val"
    ):
        load_corpus(cfg, ["test2016"])


@pytest.mark.parametrize(
    ("name", "content", "columns", "message"),
    [
        (
            "short.tsv",
            "de\ten\nEin Hund.\tA dog.\nnur eine Spalte\n",
            ["de", "en"],
            "short.tsv, line 3: 1 tab-separated",
        ),
        ("header.tsv", "src\ttgt\nx\ty\n", ["de", "en"], "no column 'de' in the header row"),
        ("bad.jsonl", '{"de": "x", "en": "y"}\n{"de": \n', ["de", "en"], "bad.jsonl, line 2: not JSON"),
        ("field.jsonl", '{"de": "x"}\n', ["de", "en"], "field.jsonl, line 1: no field 'en'"),
        ("corpus.csv", "de,en\n", ["de", "en"], "cannot tell the table format"),
    ],
)
def test_bad_tables_are_one_line_errors(
    tmp_path: Path, name: str, content: str, columns, message: str
) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message) as err:
        list(table_pairs([path], columns))
    assert "\n" not in str(err.value)


def test_a_parquet_file_without_the_named_field(tmp_path: Path) -> None:
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"src": DE, "tgt": EN}), path)
    with pytest.raises(DataError, match="no column 'de' \\(columns: src, tgt\\)"):
        list(table_pairs([path], ["de", "tgt"]))
    pq.write_table(pa.Table.from_pylist(translation_records(DE, EN)), path)
    with pytest.raises(DataError, match="no field 'translation.fr'"):
        list(table_pairs([path], ["translation.de", "translation.fr"]))
    with pytest.raises(DataError, match="does not exist"):
        list(table_pairs([tmp_path / "gone.parquet"], ["src", "tgt"]))


def test_bad_rows_are_dropped_and_counted(tiny_corpus: TinyCorpus, tmp_path: Path) -> None:
    rows = b"".join(
        [
            b"Ein Hund.\tA dog.\n",
            b"Stra\xdfe\tstreet\n",  # Latin-1, not UTF-8
            b"\tempty source\n",
            b"Ein Mann.\tA man.\n",
        ]
    )
    (tmp_path / "train.tsv").write_bytes(rows)
    cfg = load_config(
        CONFIGS / "tiny.yaml",
        [
            *FAST_TRAINING,
            "data.source=table",
            f"data.tables.train=[{tmp_path / 'train.tsv'}]",
            "data.columns=['0','1']",
        ],
    )
    corpus = prepare_corpus(cfg, tiny_corpus.root, tiny_corpus.src_tok, tiny_corpus.tgt_tok, quiet)
    assert len(corpus) == 2
    assert corpus.manifest["dropped"] == {
        "undecodable": 1,
        "empty": 1,
        "too_long": 0,
        "ratio": 0,
        "duplicate": 0,
        "score": 0,
    }


def save_hub_dataset(directory: Path) -> Path:
    """A local dataset in the wmt14 schema, split files named as the hub names them."""
    directory.mkdir()
    for split, n in (("train", 3), ("validation", 2), ("test", 1)):
        pq.write_table(
            pa.Table.from_pylist(translation_records(DE[:n], EN[:n])), directory / f"{split}.parquet"
        )
    return directory


def test_a_hub_dataset_streams_through_the_real_loader(tmp_path: Path) -> None:
    local = save_hub_dataset(tmp_path / "wmt-like")
    columns = ["translation.de", "translation.en"]
    assert list(hub_pairs(str(local), None, "validation", columns)) == list(zip(DE[:2], EN[:2], strict=True))
    cfg = DataConfig(source="hub", hub=str(local), columns=columns)
    corpus = load_corpus(cfg, ["train", "val", "test"])
    assert {name: len(split) for name, split in corpus.items()} == {"train": 3, "val": 2, "test": 1}
    with pytest.raises(DataError, match="no field 'translation.fr'"):
        list(hub_pairs(str(local), None, "train", ["translation.de", "translation.fr"]))


def test_a_hub_dataset_that_does_not_exist_is_one_error(tmp_path: Path) -> None:
    args = ["--set", "data.source=hub", "--set", "data.hub=no-such-user/no-such-dataset"]
    args += ["--set", "data.columns=[translation.de,translation.en]", "--run", str(tmp_path / "run")]
    result = subprocess.run(
        [sys.executable, "-m", "mt_cli", "prepare", "--config", "tiny", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},  # offline here: the hub answers "not found" at once
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: hub dataset no-such-user/no-such-dataset") and "cannot be read" in line
    assert not (tmp_path / "run").exists()


def test_the_training_fingerprint_follows_every_setting_that_changes_the_pairs(tmp_path: Path) -> None:
    hub = DataConfig(
        source="hub", hub="wmt14", hub_config="de-en", columns=["translation.de", "translation.en"]
    )
    variants = [hub, dataclasses.replace(hub, train_limit=10), dataclasses.replace(hub, hub_config="fr-en")]
    variants.append(dataclasses.replace(hub, columns=["translation.en", "translation.de"]))
    table = write_jsonl(tmp_path / "t.jsonl", translation_records(DE, EN))
    tables = DataConfig(
        source="table", tables={"train": [str(table)]}, columns=["translation.de", "translation.en"]
    )
    variants += [tables, dataclasses.replace(tables, train_limit=2)]
    prints = [json.dumps(train_fingerprint(cfg), sort_keys=True) for cfg in variants]
    assert len(set(prints)) == len(prints)
