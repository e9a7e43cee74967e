"""Ensembles: a model with itself is the model; two models combine log-linearly per step; every
search, forced decoding and attention run on an ensemble."""

from __future__ import annotations

import pytest
import torch
from helpers import VOCAB, greedy_tokens, other_model, random_model, random_sources, sample

from mt_cli.config.options import Sampling
from mt_cli.data.batch import pad_sources
from mt_cli.decode.ensemble import Ensemble
from mt_cli.decode.scoring import force_decode
from mt_cli.decode.search import beam_search
from mt_cli.specials import BOS_ID, EOS_ID


def test_a_model_ensembled_with_itself_is_the_model() -> None:
    model = random_model(2)
    twice = Ensemble([model, model])
    sources = random_sources(10, seed=3)
    src, src_mask = pad_sources(sources)
    assert greedy_tokens(twice, src, src_mask, 1.5, 8) == greedy_tokens(model, src, src_mask, 1.5, 8)
    alone = beam_search(model, src, src_mask, 4, 1.0, 1.5, 8, n_best=3)
    ensembled = beam_search(twice, src, src_mask, 4, 1.0, 1.5, 8, n_best=3)
    assert [[h.tokens for h in hyps] for hyps in ensembled] == [[h.tokens for h in hyps] for hyps in alone]
    for a, e in zip(alone, ensembled):
        assert [h.score for h in e] == pytest.approx([h.score for h in a], abs=1e-5)
    seeds, how = list(range(10)), Sampling(top_p=0.9)
    assert [h.tokens for h in sample(twice, sources, how, seeds)] == [
        h.tokens for h in sample(model, sources, how, seeds)
    ]


@torch.no_grad()
def test_step_scores_are_the_weighted_mean_of_member_log_probs() -> None:
    first, second = random_model(4), other_model(5)
    ensemble = Ensemble([first, second], weights=[1.0, 3.0])
    assert ensemble.weights == (0.25, 0.75)
    assert ensemble.max_positions == 48
    src, src_mask = pad_sources(random_sources(3, seed=6))
    caches = [m.start_cache(m.encode(src, src_mask), src_mask) for m in (first, second)]
    cache = ensemble.start_cache(ensemble.encode(src, src_mask), src_mask)
    tokens = torch.full((3,), BOS_ID)
    for t in range(5):
        combined, cache, _ = ensemble.step(tokens, cache)  # (3, V)
        parts = []
        for i, m in enumerate((first, second)):
            logits, caches[i], _ = m.step(tokens, caches[i])
            parts.append(logits.log_softmax(-1))
        mean = 0.25 * parts[0] + 0.75 * parts[1]  # (3, V)
        torch.testing.assert_close(combined, mean)  # unnormalised: greedy search needs no more
        log_probs = combined.log_softmax(-1)  # what the other searches take
        torch.testing.assert_close(log_probs, mean.log_softmax(-1))
        torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(3))  # a distribution
        tokens = torch.tensor([4 + t, 5 + t, 6 + t])


def test_ensemble_of_different_architectures_batches_like_one_sentence_at_a_time() -> None:
    # Every member's cache is reordered (beams) and compacted (finished sentences) alike.
    ensemble = Ensemble([random_model(7), other_model(8)])
    sources = random_sources(6, seed=9)
    src, src_mask = pad_sources(sources)
    together = beam_search(ensemble, src, src_mask, 3, 1.0, 1.5, 8, n_best=2)
    greedy = greedy_tokens(ensemble, src, src_mask, 1.5, 8)
    for source, hyps, g in zip(sources, together, greedy):
        alone = beam_search(ensemble, *pad_sources([source]), 3, 1.0, 1.5, 8, n_best=2)[0]
        assert [h.tokens for h in hyps] == [h.tokens for h in alone]
        assert greedy_tokens(ensemble, *pad_sources([source]), 1.5, 8)[0] == g
    assert any(len(h[0].tokens) > 0 for h in together)


def test_force_decode_on_an_ensemble_is_its_step_log_probs() -> None:
    ensemble = Ensemble([random_model(11), other_model(12)], weights=[2.0, 1.0])
    sources = random_sources(4, seed=13)
    targets = [[5, 6, 7], [], [8] * 9, [9, 10]]
    src, src_mask = pad_sources(sources)
    forced = force_decode(ensemble, src, src_mask, targets)
    with torch.no_grad():
        for source, target, scores in zip(sources, targets, forced):
            s, m = pad_sources([source])
            cache = ensemble.start_cache(ensemble.encode(s, m), m)
            stepped = []
            for previous, token in zip([BOS_ID, *target], [*target, EOS_ID]):
                step_scores, cache, _ = ensemble.step(torch.tensor([previous]), cache)
                stepped.append(float(step_scores.log_softmax(-1)[0, token]))
            assert scores == pytest.approx(stepped, abs=1e-5)


def test_beam_scores_on_an_ensemble_are_its_forced_log_probs() -> None:
    ensemble = Ensemble([random_model(14), other_model(15)])
    sources = random_sources(5, seed=16)
    src, src_mask = pad_sources(sources)
    best = [hyps[0] for hyps in beam_search(ensemble, src, src_mask, 4, 0.0, 1.5, 8)]
    forced = force_decode(ensemble, src, src_mask, [h.tokens for h in best])
    assert [h.score for h in best] == pytest.approx([sum(f) for f in forced], abs=1e-4)


def test_bad_ensembles_are_refused() -> None:
    with pytest.raises(ValueError, match="share their vocabularies"):
        Ensemble([random_model(), other_model(vocab=VOCAB + 1)])
    with pytest.raises(ValueError, match="2 ensemble members but 1 weights"):
        Ensemble([random_model(), random_model(1)], weights=[1.0])
    with pytest.raises(ValueError, match="positive"):
        Ensemble([random_model(), random_model(1)], weights=[1.0, 0.0])
    with pytest.raises(ValueError, match="at least one member"):
        Ensemble([])


def test_ensemble_runs_under_bf16_autocast() -> None:
    ensemble = Ensemble([random_model(1), other_model(2)])
    src, src_mask = pad_sources(random_sources(3, seed=4))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        found = beam_search(ensemble, src, src_mask, 2, 1.0, 1.5, 6)
        scores = force_decode(ensemble, src, src_mask, [h[0].tokens for h in found])
    assert all(torch.isfinite(torch.tensor(s)).all() for s in scores)
