"""Greedy and beam search: cached equals uncached, beam 1 equals greedy, scores are what they claim."""

from __future__ import annotations

import pytest
import torch
from helpers import greedy_tokens, random_model, random_sources

from mt_cli.data.batch import collate, pad_sources
from mt_cli.decode.alignment import attention_matrix
from mt_cli.decode.hypotheses import length_penalty, max_output_lengths
from mt_cli.decode.picking import one_per_row
from mt_cli.decode.search import beam_search
from mt_cli.model.transformer import Transformer
from mt_cli.specials import BOS_ID, EOS_ID, NEVER_OUTPUT


def naive_greedy(model: Transformer, source: list[int], limit: int) -> list[int]:
    """The textbook loop on our model, one sentence: re-run the whole decoder on the prefix at every step."""
    src, src_mask = pad_sources([source])
    memory = model.encode(src, src_mask)
    prefix = [BOS_ID]
    for _ in range(limit):
        batch = collate([source], [prefix + [EOS_ID]])
        logits = model.decode(batch.tgt_in, memory, src_mask, batch.tgt_mask)  # (1, T, V)
        log_probs = logits[0, -1].float().log_softmax(-1)  # (V,)
        log_probs[NEVER_OUTPUT] = float("-inf")  # pad and <s> are never output
        token = int(log_probs.argmax())
        if token == EOS_ID or len(prefix) == limit:
            break
        prefix.append(token)
    return prefix[1:]


@torch.no_grad()
def sequence_log_prob(model: Transformer, source: list[int], tokens: list[int]) -> float:
    batch = collate([source], [[BOS_ID, *tokens, EOS_ID]])
    logits = (
        model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask).float().log_softmax(-1)
    )  # (1, T, V)
    return float(logits[0].gather(1, batch.tgt_out[0, :, None]).sum())


def test_cached_greedy_equals_uncached() -> None:
    model = random_model()
    sources = random_sources(12)
    src, src_mask = pad_sources(sources)
    limits = max_output_lengths(model, src_mask, 1.2, 5).tolist()
    cached = greedy_tokens(model, src, src_mask, 1.2, 5)
    with torch.no_grad():
        naive = [naive_greedy(model, s, limit) for s, limit in zip(sources, limits)]
    assert cached == naive
    assert any(len(c) > 0 for c in cached)


def test_batching_does_not_change_greedy_output() -> None:
    model = random_model()
    sources = random_sources(10)
    src, src_mask = pad_sources(sources)
    together = greedy_tokens(model, src, src_mask, 1.0, 6)
    alone = [greedy_tokens(model, *pad_sources([s]), 1.0, 6)[0] for s in sources]
    assert together == alone


def test_scored_greedy_path_has_the_beam_one_scores() -> None:
    # one_per_row (greedy, sampling) sums each chosen token's log-probability, EOS included,
    # forced EOS at the length limit too, as beam search does.
    model = random_model(4)
    sources = random_sources(12, seed=5)
    src, src_mask = pad_sources(sources)

    def argmax(logits: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return logits.argmax(-1)  # pad and <s> are -inf by then

    tokens, scores = one_per_row(model, src, src_mask, 0.5, 2, argmax, scored=True)
    beam = beam_search(model, src, src_mask, 1, 0.0, 0.5, 2)
    assert tokens == [h[0].tokens for h in beam] == greedy_tokens(model, src, src_mask, 0.5, 2)
    assert scores == pytest.approx([h[0].score for h in beam], abs=1e-5)
    assert one_per_row(model, src, src_mask, 0.5, 2, argmax)[1] == [0.0] * 12  # not asked: not computed


def test_output_length_limit() -> None:
    model = random_model()
    sources = random_sources(8)
    src, src_mask = pad_sources(sources)
    for hyp in greedy_tokens(model, src, src_mask, 0.0, 3):
        assert len(hyp) <= 2  # 3 positions, the last one forced to EOS
    for hyps in beam_search(model, src, src_mask, 3, 1.0, 0.0, 3, n_best=3):
        assert all(len(h.tokens) <= 2 for h in hyps)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_one_equals_greedy(seed: int) -> None:
    model = random_model(seed)
    sources = random_sources(16, seed=seed + 10)
    src, src_mask = pad_sources(sources)
    greedy = greedy_tokens(model, src, src_mask, 1.5, 8)
    beam = beam_search(model, src, src_mask, 1, 0.0, 1.5, 8)
    assert [h[0].tokens for h in beam] == greedy


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_scores_are_ordered_and_length_normalised(alpha: float) -> None:
    model = random_model(3)
    sources = random_sources(6, seed=4)
    src, src_mask = pad_sources(sources)
    results = beam_search(model, src, src_mask, 4, alpha, 1.5, 8, n_best=4)
    for source, hyps in zip(sources, results):
        assert len(hyps) == 4
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        for hyp in hyps:  # log-probability / |Y| ** alpha, |Y| counting EOS (CTranslate2's convention)
            expected = sequence_log_prob(model, source, hyp.tokens) / (len(hyp.tokens) + 1) ** alpha
            assert hyp.score == pytest.approx(expected, abs=1e-4)


def test_beam_search_of_a_batch_equals_one_sentence_at_a_time() -> None:
    # Sentences finish at different steps and leave the batch, and beams move between cache
    # rows; none of it may change any sentence's result.
    model = random_model(9)
    sources = random_sources(14, seed=12)
    src, src_mask = pad_sources(sources)
    together = beam_search(model, src, src_mask, 4, 1.0, 1.5, 8, n_best=3)
    for source, hyps in zip(sources, together):
        alone = beam_search(model, *pad_sources([source]), 4, 1.0, 1.5, 8, n_best=3)[0]
        assert [h.tokens for h in hyps] == [h.tokens for h in alone]
        assert [h.score for h in hyps] == pytest.approx([h.score for h in alone], abs=1e-5)


def test_beam_finds_at_least_the_greedy_score() -> None:
    model = random_model(5)
    sources = random_sources(10, seed=6)
    src, src_mask = pad_sources(sources)
    greedy = greedy_tokens(model, src, src_mask, 1.5, 8)
    beam = beam_search(model, src, src_mask, 5, 0.0, 1.5, 8)
    for source, g, b in zip(sources, greedy, beam):
        assert b[0].score >= sequence_log_prob(model, source, g) - 1e-4


def test_length_penalty_prefers_longer_outputs() -> None:
    model = random_model(7)
    sources = random_sources(20, seed=8)
    src, src_mask = pad_sources(sources)
    short = beam_search(model, src, src_mask, 5, 0.0, 1.5, 8)
    long = beam_search(model, src, src_mask, 5, 2.0, 1.5, 8)
    assert sum(len(h[0].tokens) for h in long) >= sum(len(h[0].tokens) for h in short)
    assert length_penalty(10, 0.0) == 1.0 and length_penalty(9, 0.5) == 3.0


def test_cross_attention_rows_are_distributions() -> None:
    model = random_model()
    source = random_sources(1)[0]
    src, src_mask = pad_sources([source])
    weights = attention_matrix(model, src, src_mask, [[5, 6, 7]])[0]
    assert weights.shape == (4, len(source))
    torch.testing.assert_close(weights.sum(-1), torch.ones(4))
