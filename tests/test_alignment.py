"""Alignments: pieces map to words, the argmax of each target piece's attention (never the EOS)
gives Pharaoh pairs, attention comes from the chosen layer, ensembles average their members'."""

from __future__ import annotations

import pytest
import torch
from helpers import other_model, random_model, random_sources

from mt_cli.data.batch import pad_sources
from mt_cli.decode.alignment import attention_matrix, pharaoh, piece_to_word, word_alignment
from mt_cli.decode.ensemble import Ensemble


@pytest.mark.parametrize(
    ("pieces", "words"),
    [
        (["▁Ein", "▁Hund", "▁läuft", "."], [0, 1, 2, 2]),
        (["▁Zwei", "▁jung", "e", "▁Männer", "▁", "(", "x", ")"], [0, 1, 1, 2, 3, 3, 3, 3]),
        (["ab", "c", "▁d"], [0, 0, 1]),  # a first piece without "▁" still starts word 0
        # A piece that is only "▁" is a space: "▁red ▁ ▁ ." is "red  .", two words; at the end
        # it stays with the word before.
        (["▁red", "▁", "▁", "."], [0, 1, 1, 1]),
        (["▁a", "▁"], [0, 0]),
        ([], []),
    ],
)
def test_piece_to_word(pieces: list[str], words: list[int]) -> None:
    assert piece_to_word(pieces) == words


def test_word_alignment_on_a_hand_made_matrix() -> None:
    src = ["▁Ein", "▁Hund", "e", "▁läuft"]  # words: Ein Hunde läuft
    tgt = ["▁A", "▁do", "g", "▁runs"]  # words: A dog runs
    attention = torch.tensor(
        [  # columns: Ein, Hund, e, läuft, </s>; rows: A, do, g, runs, </s>
            [0.70, 0.10, 0.10, 0.05, 0.05],
            [0.05, 0.60, 0.10, 0.05, 0.20],
            [0.05, 0.20, 0.30, 0.05, 0.40],  # the source EOS is its maximum: the next best counts
            [0.10, 0.10, 0.10, 0.30, 0.40],
            [0.00, 0.00, 0.00, 0.00, 1.00],  # the EOS row aligns nothing
        ]
    )
    pairs = word_alignment(attention, src, tgt)
    assert pairs == [(0, 0), (1, 1), (2, 2)]  # "do" and "g" both go to Hunde: one pair
    assert pharaoh(pairs) == "0-0 1-1 2-2"
    attention[3] = torch.tensor([0.1, 0.5, 0.1, 0.1, 0.2])  # runs -> Hund: a word aligned twice
    assert pharaoh(word_alignment(attention, src, tgt)) == "0-0 1-1 1-2"
    assert word_alignment(attention, [], tgt) == [] and word_alignment(attention, src, []) == []
    with pytest.raises(ValueError, match="does not cover"):
        word_alignment(attention[:3], src, tgt)


def test_attention_matrix_rows_are_distributions_over_the_real_source() -> None:
    model = random_model(1)
    sources = random_sources(5, seed=2)
    targets = [[5, 6, 7], [], [8] * 7, [9], [10, 11]]
    src, src_mask = pad_sources(sources)
    matrices = attention_matrix(model, src, src_mask, targets)
    for source, target, matrix in zip(sources, targets, matrices):
        assert matrix.shape == (len(target) + 1, len(source))
        torch.testing.assert_close(matrix.sum(-1), torch.ones(len(target) + 1))
        alone = attention_matrix(model, *pad_sources([source]), [target])[0]
        torch.testing.assert_close(matrix, alone, atol=1e-5, rtol=0)  # padding changes nothing


def test_the_default_layer_is_the_last_and_layers_differ() -> None:
    model = random_model(3)  # two decoder layers
    src, src_mask = pad_sources(random_sources(3, seed=4))
    targets = [[5, 6, 7, 8], [9, 10], [11]]
    default = attention_matrix(model, src, src_mask, targets)
    for layer in (1, -1):
        for a, b in zip(default, attention_matrix(model, src, src_mask, targets, layer=layer)):
            torch.testing.assert_close(a, b)
    first = attention_matrix(model, src, src_mask, targets, layer=0)
    assert all((a - b).abs().max() > 1e-3 for a, b in zip(default, first))
    with pytest.raises(ValueError, match="decoder layer 2 does not exist; the decoder has 2 layers"):
        attention_matrix(model, src, src_mask, targets, layer=2)


def test_an_ensemble_attention_is_the_weighted_mean_of_its_members() -> None:
    first, second = random_model(5), other_model(6)  # 2 and 3 decoder layers: each one's last
    ensemble = Ensemble([first, second], weights=[1.0, 3.0])
    src, src_mask = pad_sources(random_sources(2, seed=7))
    targets = [[5, 6], [7, 8, 9]]
    combined = attention_matrix(ensemble, src, src_mask, targets)
    parts = [attention_matrix(m, src, src_mask, targets) for m in (first, second)]
    for c, a, b in zip(combined, *parts):
        torch.testing.assert_close(c, 0.25 * a + 0.75 * b)


def test_attention_matrix_runs_under_bf16_autocast() -> None:
    model = random_model(8)
    source = random_sources(1, seed=9)[0]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        matrix = attention_matrix(model, *pad_sources([source]), [[5, 6, 7]])[0]
    assert matrix.dtype == torch.float32
    torch.testing.assert_close(matrix.sum(-1), torch.ones(4), atol=1e-2, rtol=0)
