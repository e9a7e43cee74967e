"""data/dataset.py: pairs encoded in memory, their widths and batches, the length filter."""

from __future__ import annotations

from pathlib import Path

from mt_cli.config.sections import DataConfig
from mt_cli.data.corpus import load_corpus
from mt_cli.data.dataset import EncodedPairs, encode_pairs, short_enough
from mt_cli.data.sampler import TokenBatchSampler
from mt_cli.specials import BOS_ID, EOS_ID
from mt_cli.text.tokenizer import Tokenizer


def test_short_enough_boundary() -> None:
    pairs = EncodedPairs(
        [[7] * 5 + [EOS_ID], [7] * 6 + [EOS_ID], [7, EOS_ID], [7, EOS_ID]],
        [[BOS_ID] + [7] * 5 + [EOS_ID], [BOS_ID, 7, EOS_ID], [BOS_ID] + [7] * 6 + [EOS_ID], [BOS_ID, EOS_ID]],
    )
    assert pairs.widths() == ([6, 7, 2, 2], [6, 2, 7, 1])
    assert short_enough(pairs, max_len=5) == [0, 3]
    assert short_enough(pairs, max_len=6) == [0, 1, 2, 3]


def test_collate_follows_the_sampled_indices() -> None:
    pairs = EncodedPairs(
        [[4] * n + [EOS_ID] for n in range(1, 30)], [[BOS_ID] + [5] * n + [EOS_ID] for n in range(1, 30)]
    )
    sampler = TokenBatchSampler(*pairs.widths(), 200, True, 0)
    total = 0
    for indices in sampler:
        batch = pairs.collate(indices)
        assert batch.n_sentences == len(indices)
        assert batch.src_tokens == sum(len(pairs.src[i]) for i in indices)
        assert batch.src.numel() + batch.tgt_in.numel() <= 200 or len(indices) == 1
        total += batch.n_sentences
    assert total == len(pairs)


def test_encoding_and_padding_on_multi30k(
    small_tokenizers: tuple[Tokenizer, Tokenizer], data_dir: Path
) -> None:
    train = load_corpus(DataConfig(dir=str(data_dir)), ["train"])["train"].to_dict()
    src_tok, tgt_tok = small_tokenizers
    pairs = encode_pairs(train["src"], train["tgt"], src_tok, tgt_tok)
    assert pairs.src[0] == src_tok.encode([train["src"][0]])[0] + [EOS_ID]
    assert pairs.tgt[0] == [BOS_ID] + tgt_tok.encode([train["tgt"][0]])[0] + [EOS_ID]
    assert len(short_enough(pairs, max_len=128)) == len(pairs) == 29000
    src, tgt = pairs.widths()
    sampler = TokenBatchSampler(src, tgt, 4096, shuffle=True, seed=1)
    padded = sum(len(b) * (max(src[i] for i in b) + max(tgt[i] for i in b)) for b in sampler.batches())
    assert 1 - (sum(src) + sum(tgt)) / padded < 0.10  # length buckets keep padding under 10%
