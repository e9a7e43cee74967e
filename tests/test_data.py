from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import datasets
import pytest
import torch

from mt_cli import corpus
from mt_cli.config import DataConfig
from mt_cli.corpus import load_corpus, split_sizes
from mt_cli.data import (
    Batch,
    TokenBatchSampler,
    collate,
    encode_split,
    encoded_lists,
    filter_long,
    iterate_batches,
    pad_sources,
    padding_fraction,
    sequence_lengths,
)
from mt_cli.errors import DataError
from mt_cli.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer

# ------------------------------------------------------------------------------ collation


def test_collate_shift_masks_and_counts() -> None:
    src = [[5, 6, 7, EOS_ID], [8, EOS_ID]]
    tgt = [[BOS_ID, 9, 10, EOS_ID], [BOS_ID, 11, 12, 13, 14, EOS_ID]]
    b = collate(src, tgt)
    assert b.src.tolist() == [[5, 6, 7, EOS_ID], [8, EOS_ID, PAD_ID, PAD_ID]]
    assert b.tgt_in.tolist() == [[BOS_ID, 9, 10, PAD_ID, PAD_ID], [BOS_ID, 11, 12, 13, 14]]
    assert b.tgt_out.tolist() == [[9, 10, EOS_ID, PAD_ID, PAD_ID], [11, 12, 13, 14, EOS_ID]]
    assert b.src.dtype == b.tgt_in.dtype == b.tgt_out.dtype == torch.long
    assert b.src_mask.shape == (2, 1, 1, 4) and b.src_mask.dtype == torch.bool
    assert b.src_mask[:, 0, 0].tolist() == [[True] * 4, [True, True, False, False]]
    assert b.tgt_mask.shape == (2, 1, 5, 5) and b.tgt_mask.dtype == torch.bool
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    assert torch.equal(b.tgt_mask[1, 0], causal)
    assert torch.equal(b.tgt_mask[0, 0], causal & torch.tensor([True, True, True, False, False]))
    assert not b.tgt_mask[0, 0, :, 3:].any()  # padded keys are never attended
    assert b.tgt_mask[:, 0].any(dim=-1).all()  # no fully masked query row (SDPA would give NaN)
    assert (b.src_tokens, b.tgt_tokens, b.n_sentences) == (6, 8, 2)
    assert b.tgt_tokens == int((b.tgt_out != PAD_ID).sum())


def test_pad_sources_is_collates_source_half() -> None:
    src = [[4, EOS_ID], [5, 6, 7, EOS_ID], [EOS_ID]]
    ids, mask = pad_sources(src)
    b = collate(src, [[BOS_ID, EOS_ID]] * 3)
    assert torch.equal(ids, b.src) and torch.equal(mask, b.src_mask)
    assert torch.equal(mask[:, 0, 0], ids != PAD_ID)


def test_collate_rejects_targets_without_specials() -> None:
    with pytest.raises(ValueError):
        collate([[EOS_ID]], [[EOS_ID]])


def test_batch_to_keeps_values() -> None:
    b = collate([[4, EOS_ID]], [[BOS_ID, 5, EOS_ID]])
    moved = b.to("cpu")
    assert isinstance(moved, Batch) and torch.equal(moved.tgt_mask, b.tgt_mask)
    assert (moved.src_tokens, moved.tgt_tokens, moved.n_sentences) == (2, 2, 1)


# ------------------------------------------------------------------------------- sampler


def _lengths(n: int = 2000, seed: int = 0) -> tuple[list[int], list[int]]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(2, 40, (n,), generator=g).tolist(), torch.randint(2, 45, (n,), generator=g).tolist()


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("shuffle", [True, False])
def test_each_pair_once_per_epoch_with_equal_counts(world_size: int, shuffle: bool) -> None:
    src, tgt = _lengths()
    for max_tokens in (600, 1000, 4096):
        samplers = [
            TokenBatchSampler(src, tgt, max_tokens, shuffle=shuffle, seed=3, rank=r, world_size=world_size)
            for r in range(world_size)
        ]
        for epoch in (0, 1):
            seen: Counter[int] = Counter()
            counts = set()
            for s in samplers:
                s.set_epoch(epoch)
                batches = list(s)
                counts.add(len(batches))
                assert len(batches) == len(s)
                seen.update(i for b in batches for i in b)
                for b in batches:  # budget, counting padding on both sides
                    assert (
                        len(b) == 1
                        or (max(src[i] for i in b) + max(tgt[i] for i in b)) * len(b) <= max_tokens
                    )
            assert len(counts) == 1
            assert seen == Counter(range(len(src)))


def test_remainder_batches_are_split_to_divide_evenly() -> None:
    src, tgt = [10] * 10, [10] * 10
    whole = TokenBatchSampler(src, tgt, 80, shuffle=False, seed=0)  # 4 per batch: 4+4+2
    assert [len(b) for b in whole] == [4, 4, 2]
    for ws in (2, 4, 5):
        sizes = [[len(b) for b in TokenBatchSampler(src, tgt, 80, False, 0, r, ws)] for r in range(ws)]
        assert len({len(s) for s in sizes}) == 1 and sum(map(sum, sizes)) == 10
    with pytest.raises(DataError, match="equal shares"):
        len(TokenBatchSampler([10] * 3, [10] * 3, 20, False, 0, 0, 2))


def test_oversized_pair_gets_its_own_batch() -> None:
    s = TokenBatchSampler([5, 200, 5], [5, 200, 5], 100, shuffle=False, seed=0)
    assert list(s) == [[0, 2], [1]]


def test_eval_mode_keeps_sorted_order() -> None:
    src, tgt = _lengths(500)
    s = TokenBatchSampler(src, tgt, 1000, shuffle=False, seed=0)
    flat = [i for b in s for i in b]
    assert flat == sorted(range(500), key=lambda i: (src[i], tgt[i], i))
    s.set_epoch(5)
    assert [i for b in s for i in b] == flat


def test_shuffle_is_seeded_per_epoch() -> None:
    src, tgt = _lengths()

    def epoch_batches(seed: int, epoch: int) -> list[list[int]]:
        s = TokenBatchSampler(src, tgt, 1000, shuffle=True, seed=seed)
        s.set_epoch(epoch)
        return list(s)

    assert epoch_batches(1, 0) == epoch_batches(1, 0)
    assert epoch_batches(1, 0) != epoch_batches(1, 1)
    assert epoch_batches(1, 0) != epoch_batches(2, 0)


@pytest.mark.parametrize("world_size", [1, 2])
def test_resume_mid_epoch_yields_the_remaining_batches(world_size: int) -> None:
    src, tgt = _lengths()
    full = TokenBatchSampler(src, tgt, 1000, True, 7, rank=world_size - 1, world_size=world_size)
    full.set_epoch(4)
    expected = list(full)
    resumed = TokenBatchSampler(src, tgt, 1000, True, 7, rank=world_size - 1, world_size=world_size)
    resumed.set_epoch(4)
    resumed.start_at(5)
    assert list(resumed) == expected[5:]
    assert list(resumed) == expected  # the offset applies to one iteration only
    resumed.start_at(len(resumed))
    assert list(resumed) == []
    with pytest.raises(ValueError):
        resumed.start_at(len(resumed) + 1)


def test_iterate_batches_collates_the_sampled_pairs() -> None:
    src_ids = [[4] * n + [EOS_ID] for n in range(1, 30)]
    tgt_ids = [[BOS_ID] + [5] * n + [EOS_ID] for n in range(1, 30)]
    s = TokenBatchSampler([len(x) for x in src_ids], [len(y) - 1 for y in tgt_ids], 200, True, 0)
    total = 0
    for indices, batch in iterate_batches(src_ids, tgt_ids, s):
        assert batch.n_sentences == len(indices)
        assert batch.src_tokens == sum(len(src_ids[i]) for i in indices)
        assert batch.src.numel() + batch.tgt_in.numel() <= 200 or len(indices) == 1
        total += batch.n_sentences
    assert total == len(src_ids)


# -------------------------------------------------------------------------------- encoding


def test_filter_long_boundary() -> None:
    ds = datasets.Dataset.from_dict(
        {
            "src_ids": [[7] * 5 + [EOS_ID], [7] * 6 + [EOS_ID], [7, EOS_ID], [7, EOS_ID]],
            "tgt_ids": [
                [BOS_ID] + [7] * 5 + [EOS_ID],
                [BOS_ID, 7, EOS_ID],
                [BOS_ID] + [7] * 6 + [EOS_ID],
                [BOS_ID, EOS_ID],
            ],
        }
    )
    kept, dropped = filter_long(ds, max_len=5)
    assert dropped == 2 and len(kept) == 2
    assert sequence_lengths(kept) == ([6, 2], [6, 1])
    assert filter_long(ds, max_len=6) == (ds, 0)


def test_encode_and_padding_fraction_on_multi30k(
    small_tokenizers: tuple[Tokenizer, Tokenizer], data_dir: Path
) -> None:
    train = load_corpus(DataConfig(dir=str(data_dir)), ["train"])["train"]
    src_tok, tgt_tok = small_tokenizers
    enc = encode_split(train, src_tok, tgt_tok)
    assert enc.column_names == ["src", "tgt", "src_ids", "tgt_ids"]
    src_ids, tgt_ids = encoded_lists(enc)
    assert src_ids[0] == src_tok.encode([train[0]["src"]])[0] + [EOS_ID]
    assert tgt_ids[0] == [BOS_ID] + tgt_tok.encode([train[0]["tgt"]])[0] + [EOS_ID]
    kept, dropped = filter_long(enc, max_len=128)
    assert dropped == 0 and len(kept) == 29000
    src_len, tgt_len = sequence_lengths(kept)
    sampler = TokenBatchSampler(src_len, tgt_len, 4096, shuffle=True, seed=1)
    fraction = padding_fraction(sampler)
    print(f"padding fraction {fraction:.4f} over {len(sampler)} batches")
    assert fraction < 0.10


# ---------------------------------------------------------------------------------- corpus


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
    assert split_sizes(corpus) == {"train": 3, "val": 1, "test2016": 2}
    assert corpus["train"][0] == {"src": "ein hund", "tgt": "a dog"}
    assert corpus["test2016"]["src"] == ["  leerzeichen  ", ""]  # eval lines never stripped or dropped
    flipped = load_corpus(DataConfig(dir=str(mini_multi30k), src_lang="en", tgt_lang="de"), ["train"])
    assert list(flipped) == ["train"] and flipped["train"][1] == {"src": "two cats", "tgt": "zwei katzen"}
    limited = load_corpus(DataConfig(dir=str(mini_multi30k), train_limit=2), ["train", "val"])
    assert split_sizes(limited) == {"train": 2, "val": 1}


def test_env_var_is_used_when_dir_unset(mini_multi30k: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MT_DATA_DIR", str(mini_multi30k))
    assert split_sizes(load_corpus(DataConfig(), ["val"])) == {"val": 1}


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
    assert split_sizes(corpus) == {"train": 3, "val": 3}
    assert corpus["val"]["tgt"] == ["one ", "two", "three"]

    short = _write(tmp_path / "short.tgt", ["one", "two"])
    with pytest.raises(DataError, match=f"{src} has 3 lines, {short} has 2"):
        load_corpus(DataConfig(source="files", files={"train": [str(src), str(short)]}))

    latin1 = _write(tmp_path / "latin1.tgt", "one\ntwo\ndrei Stra\xdfen\n".encode("latin-1"))
    with pytest.raises(DataError, match=f"{latin1} is not UTF-8 \\(line 3\\)"):
        load_corpus(DataConfig(source="files", files={"train": [str(src), str(latin1)]}))

    with pytest.raises(DataError, match="nope.txt does not exist"):
        load_corpus(DataConfig(source="files", files={"train": [str(src), str(tmp_path / "nope.txt")]}))


def test_multi30k_sizes(data_dir: Path) -> None:
    corpus = load_corpus(DataConfig(dir=str(data_dir)))
    sizes = split_sizes(corpus)
    assert {k: sizes[k] for k in ("train", "val", "test2016")} == {
        "train": 29000,
        "val": 1014,
        "test2016": 1000,
    }
    assert corpus.column_names["train"] == ["src", "tgt"]


def test_import_does_not_load_datasets() -> None:
    code = "import sys, mt_cli.data, mt_cli.corpus; assert 'datasets' not in sys.modules"
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
    assert split_sizes(loaded) == {"train": 2, "val": 1, "test2016": 1}
    assert loaded["train"][1] == {"src": "zwei katzen", "tgt": "two cats"}
    flipped = load_corpus(DataConfig(src_lang="en", tgt_lang="de"), ["test2016"])
    assert flipped["test2016"][0] == {"src": "a house", "tgt": "ein haus"}
