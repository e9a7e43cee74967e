"""data/corpus.py: Multi30k from a local copy, the shipped one or the hub; any parallel files."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

from mt_cli.config import DataConfig
from mt_cli.data import corpus
from mt_cli.data.corpus import load_corpus
from mt_cli.errors import DataError


def sizes_of(splits: datasets.DatasetDict) -> dict[str, int]:
    return {name: len(split) for name, split in splits.items()}


def _write(path: Path, lines: list[str] | bytes) -> Path:
    raw = lines if isinstance(lines, bytes) else "".join(x + "\n" for x in lines).encode("utf-8")
    if path.suffix == ".gz":
        raw = gzip.compress(raw)
    path.write_bytes(raw)
    return path


@pytest.fixture
def mini_multi30k(tmp_path: Path) -> Path:
    _write(tmp_path / "train.de.gz", ["ein hund", "zwei katzen", "drei"])
    _write(tmp_path / "train.en.gz", ["a dog", "two cats", "three"])
    _write(tmp_path / "val.de", ["hallo"])
    _write(tmp_path / "val.en", ["hello"])
    _write(tmp_path / "test_2016_flickr.de", ["  leerzeichen  ", ""])
    _write(tmp_path / "test_2016_flickr.en", ["  spaces  ", ""])
    _write(tmp_path / "test_2017_mscoco.de", ["x"])  # English side absent: not a split
    return tmp_path


def test_local_multi30k_both_directions(mini_multi30k: Path) -> None:
    corpus = load_corpus(DataConfig(dir=str(mini_multi30k)))
    assert sizes_of(corpus) == {"train": 3, "val": 1, "test2016": 2}
    assert corpus["train"][0] == {"src": "ein hund", "tgt": "a dog"}
    assert corpus["test2016"]["src"] == ["  leerzeichen  ", ""]  # eval lines never stripped or dropped
    flipped = load_corpus(DataConfig(dir=str(mini_multi30k), src_lang="en", tgt_lang="de"), ["train"])
    assert list(flipped) == ["train"] and flipped["train"][1] == {"src": "two cats", "tgt": "zwei katzen"}
    limited = load_corpus(DataConfig(dir=str(mini_multi30k), train_limit=2), ["train", "val"])
    assert sizes_of(limited) == {"train": 2, "val": 1}


def test_env_var_is_used_when_dir_unset(mini_multi30k: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MT_DATA_DIR", str(mini_multi30k))
    assert sizes_of(load_corpus(DataConfig(), ["val"])) == {"val": 1}


def test_missing_split_lists_available(mini_multi30k: Path) -> None:
    with pytest.raises(DataError, match="mscoco2017.*available: train, val, test2016"):
        load_corpus(DataConfig(dir=str(mini_multi30k)), ["mscoco2017"])
    with pytest.raises(DataError, match="unknown split 'dev'"):
        load_corpus(DataConfig(dir=str(mini_multi30k)), ["dev"])


def test_missing_corpus_names_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(DataError, match=f"data.dir={missing}.*MT_DATA_DIR") as err:
        load_corpus(DataConfig(dir=str(missing)))
    assert "\n" not in str(err.value)

    def offline(src: str, tgt: str) -> None:
        raise ConnectionError("Couldn't reach 'bentrevett/multi30k' on the Hub")

    monkeypatch.setattr(corpus, "SHIPPED_MULTI30K", tmp_path / "not-shipped")
    monkeypatch.setattr(corpus, "_load_hub", offline)
    with pytest.raises(DataError) as err:
        load_corpus(DataConfig())
    message = str(err.value)
    assert all(
        word in message
        for word in ("data.dir", "MT_DATA_DIR", "not-shipped", "bentrevett/multi30k", "Couldn't reach")
    )


def test_files_source_and_its_errors(tmp_path: Path) -> None:
    src = _write(tmp_path / "a.src", ["eins", "zwei\u2028halb", "drei"])  # U+2028 is not a line break
    tgt = _write(tmp_path / "a.tgt.gz", ["one", "two", "three"])
    crlf = tmp_path / "b.tgt"
    crlf.write_bytes(b"one \r\ntwo\r\nthree\r\n")
    corpus = load_corpus(
        DataConfig(source="files", files={"train": [str(src), str(tgt)], "val": [str(src), str(crlf)]})
    )
    assert sizes_of(corpus) == {"train": 3, "val": 3}
    assert corpus["val"]["tgt"] == ["one ", "two", "three"]

    short = _write(tmp_path / "short.tgt", ["one", "two"])
    with pytest.raises(DataError, match=f"{short} ends after 2 lines, {src} goes on"):
        load_corpus(DataConfig(source="files", files={"train": [str(src), str(short)]}))

    latin1 = _write(tmp_path / "latin1.tgt", "one\ntwo\ndrei Stra\xdfen\n".encode("latin-1"))
    with pytest.raises(DataError, match="split train from data.files: pair 3 is not UTF-8"):
        load_corpus(DataConfig(source="files", files={"train": [str(src), str(latin1)]}))

    with pytest.raises(DataError, match="nope.txt does not exist"):
        load_corpus(DataConfig(source="files", files={"train": [str(src), str(tmp_path / "nope.txt")]}))


def test_multi30k_sizes(data_dir: Path) -> None:
    corpus = load_corpus(DataConfig(dir=str(data_dir)))
    sizes = sizes_of(corpus)
    assert {k: sizes[k] for k in ("train", "val", "test2016")} == {
        "train": 29000,
        "val": 1014,
        "test2016": 1000,
    }
    assert corpus.column_names["train"] == ["src", "tgt"]


def test_import_does_not_load_datasets() -> None:
    code = "import sys, mt_cli.data.batch, mt_cli.data.corpus; assert 'datasets' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_hub_path_reads_the_hub_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real hub code (datasets.load_dataset of bentrevett/multi30k), pointed at a local copy in
    # that dataset's schema: train/val/test JSON lines with "en" and "de" fields.
    hub_copy = tmp_path / "bentrevett-multi30k"
    hub_copy.mkdir()
    rows = {
        "train": [("ein hund", "a dog"), ("zwei katzen", "two cats")],
        "val": [("hallo", "hello")],
        "test": [("ein haus", "a house")],
    }
    for split, pairs in rows.items():
        lines = [json.dumps({"en": en, "de": de}, ensure_ascii=False) for de, en in pairs]
        (hub_copy / f"{split}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(corpus, "SHIPPED_MULTI30K", tmp_path / "not-shipped")
    monkeypatch.setattr(corpus, "HUB_DATASET", str(hub_copy))
    loaded = load_corpus(DataConfig(), ["train", "val", "test2016"])
    assert sizes_of(loaded) == {"train": 2, "val": 1, "test2016": 1}
    assert loaded["train"][1] == {"src": "zwei katzen", "tgt": "two cats"}
    flipped = load_corpus(DataConfig(src_lang="en", tgt_lang="de"), ["test2016"])
    assert flipped["test2016"][0] == {"src": "a house", "tgt": "ein haus"}
