"""Sampling: top-k 1 is greedy, a line's sample depends on its seed only, the draws follow the
truncated, tempered softmax, bad settings are one-line input errors."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import greedy_tokens, random_model, random_sources, sample

from mt_cli.config.options import Sampling
from mt_cli.data.batch import pad_sources
from mt_cli.decode.sampling import draw, line_seed, truncated_distribution
from mt_cli.decode.scoring import force_decode
from mt_cli.errors import InputError


@pytest.mark.parametrize(
    "sampling", [Sampling(top_k=1), Sampling(temperature=0.0), Sampling(temperature=1e-30)]
)
def test_top_k_one_and_temperature_zero_are_greedy(sampling: Sampling) -> None:
    model = random_model(2)
    sources = random_sources(12, seed=3)
    src, src_mask = pad_sources(sources)
    greedy = greedy_tokens(model, src, src_mask, 1.5, 6)
    sampled = sample(model, sources, sampling, list(range(12)))
    assert [h.tokens for h in sampled] == greedy
    assert any(len(tokens) > 0 for tokens in greedy)


def test_a_line_sample_depends_on_its_seed_not_on_its_batch() -> None:
    model = random_model(4)
    sources = random_sources(10, seed=5)
    seeds = [line_seed(7, f"line {i}") for i in range(10)]
    sampling = Sampling(top_k=20, top_p=0.95, temperature=1.2, seed=7)
    together = sample(model, sources, sampling, seeds)
    alone = [sample(model, [s], sampling, [seed])[0] for s, seed in zip(sources, seeds)]
    order = [7, 2, 9, 0, 4, 1, 8, 3, 6, 5]  # another order, in batches of 3 (another buffer size)
    shuffled: dict[int, list[int]] = {}
    for start in range(0, 10, 3):
        chunk = order[start : start + 3]
        found = sample(model, [sources[i] for i in chunk], sampling, [seeds[i] for i in chunk])
        shuffled.update({i: h.tokens for i, h in zip(chunk, found)})
    assert [h.tokens for h in together] == [h.tokens for h in alone] == [shuffled[i] for i in range(10)]
    assert [h.score for h in together] == pytest.approx([h.score for h in alone], abs=1e-5)
    assert len({tuple(h.tokens) for h in together}) > 5  # samples, not one repeated output


def test_two_seeds_give_different_samples() -> None:
    model = random_model(4)
    sources = random_sources(12, seed=6)
    first = sample(model, sources, Sampling(), [line_seed(0, str(i)) for i in range(12)])
    second = sample(model, sources, Sampling(), [line_seed(1, str(i)) for i in range(12)])
    differ = sum(a.tokens != b.tokens for a, b in zip(first, second))
    assert differ >= 9  # a random 40-token model spreads its mass: nearly every line differs


def test_line_seed_is_stable_and_depends_on_seed_and_line() -> None:
    # Pinned: a line's sample must not change between runs, processes or Python versions.
    assert line_seed(0, "Ein Hund läuft.") == line_seed(0, "Ein Hund läuft.") == 1063537590029179365
    assert line_seed(1, "Ein Hund läuft.") != line_seed(0, "Ein Hund läuft.")
    assert line_seed(0, "Ein Hund rennt.") != line_seed(0, "Ein Hund läuft.")
    assert all(0 <= line_seed(s, "x") < 2**63 for s in range(100))


def test_sample_scores_are_the_model_log_probability_of_the_sample() -> None:
    # Untempered and untruncated: what forced decoding gives the same tokens.
    model = random_model(8)
    sources = random_sources(8, seed=9)
    src, src_mask = pad_sources(sources)
    sampled = sample(model, sources, Sampling(top_k=5, temperature=0.5), list(range(8)))
    forced = force_decode(model, src, src_mask, [h.tokens for h in sampled])
    assert [h.score for h in sampled] == pytest.approx([sum(f) for f in forced], abs=1e-4)


def reference_distribution(
    logits: list[float], top_k: int | None, top_p: float, temperature: float
) -> list[float]:
    """The truncated, tempered softmax written out in plain Python, independently of mt."""
    exps = [math.exp(x / temperature) for x in logits]
    probs = [e / sum(exps) for e in exps]
    order = sorted(range(len(logits)), key=lambda i: -probs[i])[: top_k or len(logits)]
    kept_mass = sum(probs[i] for i in order)
    kept, mass = [], 0.0
    for i in order:
        if mass >= top_p:
            break
        kept.append(i)
        mass += probs[i] / kept_mass
    total = sum(probs[i] for i in kept)
    return [probs[i] / total if i in kept else 0.0 for i in range(len(logits))]


def test_truncated_distribution_on_a_known_vector() -> None:
    logits = torch.tensor([0.4, 0.3, 0.2, 0.1]).log()
    top = {
        Sampling(): [0.4, 0.3, 0.2, 0.1],
        Sampling(top_k=2): [4 / 7, 3 / 7, 0, 0],
        Sampling(top_p=0.6): [4 / 7, 3 / 7, 0, 0],  # 0.4 < 0.6 <= 0.7: two tokens
        Sampling(top_p=0.75): [4 / 9, 3 / 9, 2 / 9, 0],
        Sampling(top_p=0.01): [1, 0, 0, 0],  # never fewer than one token
        Sampling(temperature=0.5): [16 / 30, 9 / 30, 4 / 30, 1 / 30],  # p ** 2, renormalised
        Sampling(top_k=3, top_p=0.5): [4 / 7, 3 / 7, 0, 0],  # top-p within the top 3: 4/9 < 0.5
    }
    for sampling, expected in top.items():
        got = truncated_distribution(logits[None], sampling)[0]
        torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float32), atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    ("top_k", "top_p", "temperature"), [(None, 1.0, 1.0), (6, 1.0, 0.7), (None, 0.8, 1.3), (5, 0.9, 0.6)]
)
def test_draws_follow_the_truncated_tempered_softmax(
    top_k: int | None, top_p: float, temperature: float
) -> None:
    logits = torch.tensor([2.0, 1.5, 1.2, 0.9, 0.3, 0.0, -0.4, -1.0, -2.5, 0.95])  # (V,)
    sampling = Sampling(top_k=top_k, top_p=top_p, temperature=temperature)
    expected = torch.tensor(
        reference_distribution(logits.tolist(), top_k, top_p, temperature), dtype=torch.float64
    )
    probs = truncated_distribution(logits[None], sampling)  # (1, V)
    torch.testing.assert_close(probs[0].double(), expected, atol=1e-6, rtol=0)
    n = 200_000
    uniforms = torch.rand(n, dtype=torch.float64, generator=torch.Generator().manual_seed(11))
    tokens = draw(probs.expand(n, -1), uniforms)  # (n,)
    frequencies = torch.bincount(tokens, minlength=len(logits)).double() / n  # (V,)
    # Each frequency is a binomial proportion: 5 standard errors (a false alarm about once in
    # 3.5 million per token), and a token cut from the distribution is never drawn at all.
    tolerance = 5 * (expected * (1 - expected) / n).sqrt()  # (V,)
    assert bool(((frequencies - expected).abs() <= tolerance).all()), (frequencies, expected)
    assert bool((frequencies[expected == 0] == 0).all())


def test_draw_never_picks_a_zero_probability_token_at_the_edges() -> None:
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.5, 0.0]] * 3)  # (3, V)
    uniforms = torch.tensor([0.0, 0.5, 1.0 - 2**-53], dtype=torch.float64)  # the extremes of [0, 1)
    assert draw(probs, uniforms).tolist() == [1, 3, 3]


@pytest.mark.parametrize(
    "settings",
    [
        {"top_k": 0},
        {"top_k": -3},
        {"top_p": 0.0},
        {"top_p": 1.5},
        {"top_p": float("nan")},
        {"temperature": -0.1},
        {"temperature": float("nan")},
        {"temperature": float("inf")},
    ],
)
def test_bad_sampling_settings_are_input_errors(settings: dict) -> None:
    with pytest.raises(InputError) as error:
        Sampling(**settings)
    assert "\n" not in str(error.value)
    assert next(iter(settings)).replace("_", "-") in str(error.value)


def test_sampling_runs_under_bf16_autocast() -> None:
    model = random_model(1)
    sources = random_sources(4, seed=2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        sampled = sample(model, sources, Sampling(top_p=0.9), [1, 2, 3, 4])
    assert len(sampled) == 4 and all(math.isfinite(h.score) and h.score <= 0 for h in sampled)
