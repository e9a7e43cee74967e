"""data/corpus.py: Multi30k from a local copy, the shipped one or the hub; any parallel files."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

from mt_cli.config.sections import DataConfig
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


@pytest.mark.parametrize(("src", "tgt"), [("de", "fr"), ("cs", "en"), ("fr", "cs")])
def test_every_direction_of_multi30k_loads_from_the_shipped_files(data_dir: Path, src: str, tgt: str) -> None:
    loaded = load_corpus(DataConfig(src_lang=src, tgt_lang=tgt), ["train", "val", "test2016"])
    assert sizes_of(loaded) == {"train": 29000, "val": 1014, "test2016": 1000}
    for split, stem in (("train", "train"), ("val", "val"), ("test2016", "test_2016_flickr")):
        for side, lang in (("src", src), ("tgt", tgt)):
            with gzip.open(data_dir / f"{stem}.{lang}.gz", "rt", encoding="utf-8") as raw:
                first = raw.readline().rstrip("\n")
            assert loaded[split][0][side] == first  # line i of every language is one sentence
    # The same sentence in three languages: line 2 of the training split.
    assert loaded["train"][1]["src"] != loaded["train"][1]["tgt"]


def test_only_german_and_english_come_from_the_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(corpus, "SHIPPED_MULTI30K", tmp_path / "not-shipped")
    monkeypatch.setattr(corpus, "_load_hub", lambda src, tgt: pytest.fail("the hub has no French"))
    with pytest.raises(DataError, match="only de and en, not fr->en; set data.dir or MT_DATA_DIR") as err:
        load_corpus(DataConfig(src_lang="fr", tgt_lang="en"), ["train"])
    assert "\n" not in str(err.value)


def test_a_data_section_of_several_corpora(data_dir: Path) -> None:
    """Training pairs: every corpus, one after another; evaluation: the first corpus."""
    from mt_cli.config.recipe import config_from_dict
    from mt_cli.data.corpus import train_fingerprint, train_pairs

    entries = [
        {"source": "multi30k", "train_limit": 3},
        {"source": "multi30k", "src_lang": "fr", "train_limit": 2},
    ]
    data = config_from_dict({"data": {"corpora": entries}}).data
    pairs = list(train_pairs(data))
    de, fr = (list(train_pairs(DataConfig(src_lang=lang, train_limit=3))) for lang in ("de", "fr"))
    assert pairs == de + fr[:2]
    assert load_corpus(data, ["val"])["val"][0] == load_corpus(DataConfig(), ["val"])["val"][0]
    prints = train_fingerprint(data)["corpora"]
    assert [(p["src_lang"], p["train_limit"]) for p in prints] == [("de", 3), ("fr", 2)]
    # One corpus: the fingerprint (the reuse key of existing runs' tokenizers) is what it always was.
    assert train_fingerprint(DataConfig()) == train_fingerprint(DataConfig().entries()[0])
    assert "corpora" not in train_fingerprint(DataConfig())


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
