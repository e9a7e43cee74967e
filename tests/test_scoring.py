"""Forced decoding: its mean NLL is training's loss, it scores the greedy path as the steps do,
and padding changes nothing."""

from __future__ import annotations

import pytest
import torch
from helpers import VOCAB, greedy_tokens, random_model, random_sources

from mt_cli.data.batch import collate, pad_sources, target_ids
from mt_cli.decode.hypotheses import Decoder
from mt_cli.decode.scoring import force_decode
from mt_cli.model.loss import token_loss
from mt_cli.specials import BOS_ID, EOS_ID


def random_targets(n: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 10, (n,), generator=g).tolist()
    return [torch.randint(4, VOCAB, (length,), generator=g).tolist() for length in lengths]


@torch.no_grad()
def step_log_probs(model: Decoder, source: list[int], tokens: list[int]) -> list[float]:
    """Each token's (then EOS's) log-probability, one cached step at a time."""
    src, src_mask = pad_sources([source])
    cache = model.start_cache(model.encode(src, src_mask), src_mask)
    out = []
    for previous, token in zip([BOS_ID, *tokens], [*tokens, EOS_ID]):
        logits, cache, _ = model.step(torch.tensor([previous]), cache)  # (1, V)
        out.append(float(logits.log_softmax(-1)[0, token]))
    return out


def test_mean_nll_equals_the_training_loss_without_smoothing() -> None:
    model = random_model(3)
    sources, targets = random_sources(9, seed=4), random_targets(9, seed=5)
    batch = collate(sources, [target_ids(t) for t in targets])
    with torch.no_grad():
        logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)  # (B, T, V)
    loss = float(token_loss(logits, batch.tgt_out, 0.0)) / batch.tgt_tokens
    scores = force_decode(model, batch.src, batch.src_mask, targets)
    assert [len(s) for s in scores] == [len(t) + 1 for t in targets]  # each piece, then EOS
    assert all(x <= 0 for s in scores for x in s)
    mean_nll = -sum(map(sum, scores)) / sum(map(len, scores))
    assert mean_nll == pytest.approx(loss, rel=1e-5)


def test_scores_of_the_greedy_path_are_its_step_log_probabilities() -> None:
    model = random_model(6)
    sources = random_sources(6, seed=7)
    src, src_mask = pad_sources(sources)
    greedy = greedy_tokens(model, src, src_mask, 1.5, 8)
    scores = force_decode(model, src, src_mask, greedy)
    for source, tokens, forced in zip(sources, greedy, scores):
        assert forced == pytest.approx(step_log_probs(model, source, tokens), abs=1e-5)


def test_padding_does_not_change_a_sentence_scores() -> None:
    model = random_model(8)
    short_source, short_target = [5, 6, EOS_ID], [7, 8]
    sources = [short_source, *random_sources(4, seed=9)]  # longer sources and targets around it
    targets = [short_target, *random_targets(4, seed=10)]
    targets[1] = list(range(4, 16))
    src, src_mask = pad_sources(sources)
    together = force_decode(model, src, src_mask, targets)
    alone = force_decode(model, *pad_sources([short_source]), [short_target])
    assert together[0] == pytest.approx(alone[0], rel=1e-5, abs=1e-6)
    assert force_decode(model, *pad_sources([short_source]), [[]])[0] == pytest.approx(
        step_log_probs(model, short_source, []), abs=1e-5
    )  # an empty target: the probability of EOS alone


def test_source_and_target_counts_must_match() -> None:
    model = random_model()
    with pytest.raises(ValueError, match="2 sources but 1 targets"):
        force_decode(model, *pad_sources(random_sources(2)), [[5]])


def test_force_decode_runs_under_bf16_autocast() -> None:
    model = random_model(1)
    sources, targets = random_sources(3, seed=2), random_targets(3, seed=3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        scores = force_decode(model, *pad_sources(sources), targets)
    exact = force_decode(model, *pad_sources(sources), targets)
    for low, high in zip(scores, exact):
        assert low == pytest.approx(high, abs=0.1)  # bf16 logits, fp32 log_softmax
