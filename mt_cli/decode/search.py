"""Which search decodes, chosen in one place for every engine (``run_search``), and mt's searches
over a ``Transformer`` with its KV cache: beam search here, greedy search and sampling on the
loop of ``picking`` (sampling's draws in ``sampling``).

Shapes: B sentences, k beams, S source positions, V target vocabulary. Inputs are a padded
source ``src`` (B, S) and its mask ``src_mask`` (B, 1, 1, S), True = real token. The encoder
runs once per batch; every step feeds one token per live hypothesis and reuses the cached
keys/values. Finished sentences leave the batch, so they cost nothing afterwards.

Outputs are token ids without BOS/EOS; turning them into text is the translator's job.
The searches take any ``hypotheses.Decoder``: a ``Transformer`` or an ``ensemble.Ensemble`` of
them, and return ``hypotheses.Found``, scored and limited in length by the rules there. Forced
decoding lives in ``scoring``, attention in ``alignment``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import torch
from torch import Tensor

from mt_cli.config.options import Sampling, TranslateOptions
from mt_cli.decode.hypotheses import Decoder, Found, max_output_lengths, normalised
from mt_cli.decode.picking import most_probable, one_per_row
from mt_cli.decode.sampling import line_seed, sample_search
from mt_cli.specials import BOS_ID, EOS_ID, NEVER_OUTPUT

Hypotheses_co = TypeVar("Hypotheses_co", covariant=True)


class Searches(Protocol[Hypotheses_co]):
    """One engine's searches over one batch of sources: each gives every source's hypotheses,
    best first, scored as beam search ranks them (``hypotheses.normalised`` with ``alpha``)."""

    def sample(self, sampling: Sampling, alpha: float) -> Hypotheses_co: ...

    def beam(self, beam_size: int, n_best: int, alpha: float) -> Hypotheses_co: ...

    def greedy(self, alpha: float, scored: bool) -> Hypotheses_co:
        """``scored`` False: each score may be NaN, for the time scoring takes."""
        ...


def run_search(options: TranslateOptions, searches: Searches[Hypotheses_co]) -> Hypotheses_co:
    """The search resolved ``options`` ask for, of ``searches``: sampling when they sample, beam
    search for a beam over 1, else greedy search (what beam search of beam 1 finds, faster)."""
    if options.sampling is not None:
        return searches.sample(options.sampling, options.alpha)
    if options.beam_size > 1:
        return searches.beam(options.beam_size, options.n_best, options.alpha)
    return searches.greedy(options.alpha, options.scores)


@dataclass(frozen=True)
class ModelSearches:
    """mt's searches (``Searches``) of ``model`` over one padded batch, each output at most
    ``max_len_a * source length + max_len_b`` tokens. ``lines``: the batch's source lines, which
    seed sampling (``sampling.line_seed``); only sampling reads them."""

    model: Decoder
    src: Tensor  # (B, S)
    src_mask: Tensor  # (B, 1, 1, S)
    max_len_a: float
    max_len_b: int
    lines: Sequence[str] = ()

    def sample(self, sampling: Sampling, alpha: float) -> list[list[Found]]:
        seeds = [line_seed(sampling.seed, line) for line in self.lines]
        sampled = sample_search(
            self.model, self.src, self.src_mask, self.max_len_a, self.max_len_b, sampling, seeds
        )
        return _one_each([(h.tokens, h.score) for h in sampled], alpha)

    def beam(self, beam_size: int, n_best: int, alpha: float) -> list[list[Found]]:
        return beam_search(
            self.model, self.src, self.src_mask, beam_size, alpha, self.max_len_a, self.max_len_b, n_best
        )

    def greedy(self, alpha: float, scored: bool) -> list[list[Found]]:
        tokens, sums = one_per_row(
            self.model, self.src, self.src_mask, self.max_len_a, self.max_len_b, most_probable, scored
        )
        return _one_each(list(zip(tokens, sums if scored else [math.nan] * len(tokens))), alpha)


def _one_each(found: list[tuple[list[int], float]], alpha: float) -> list[list[Found]]:
    """Each sentence's one (tokens, summed log-probability) as its only hypothesis, normalised like
    a finished beam, so that a score means the same whatever found it."""
    return [[Found(tokens, normalised(total, len(tokens), alpha))] for tokens, total in found]


@torch.inference_mode()
def beam_search(
    model: Decoder,
    src: torch.Tensor,
    src_mask: torch.Tensor,
    beam_size: int,
    alpha: float,
    max_len_a: float,
    max_len_b: int,
    n_best: int = 1,
) -> list[list[Found]]:
    """Batched beam search; returns the ``n_best`` hypotheses per sentence, best first.

    Each step ranks the 2k best extensions per sentence: those ending in EOS within the top k
    finish, the best k others go on. A sentence is done once ``beam_size`` hypotheses have ended,
    or at its length limit, and leaves the batch. ``beam_size=1`` is exactly greedy search.
    """
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best={n_best} must be between 1 and beam_size={beam_size}")
    batch, k, device = src.size(0), beam_size, src.device
    limits = max_output_lengths(model, src_mask, max_len_a, max_len_b)  # (B,)
    # The first step runs once per sentence (all its beams would start alike), then the cache
    # holds k beams per sentence: as CTranslate2 does on the CPU, k-1 rows of step one saved.
    cache = model.start_cache(model.encode(src, src_mask), src_mask)
    scores, history, tokens = _start_beams(batch, k, device)  # (N, 1), (N*k, 0), (N,); N live sentences
    finished: list[list[Found]] = [[] for _ in range(batch)]
    n_finished = torch.zeros(batch, dtype=torch.long, device=device)  # (N,)
    alive = torch.arange(batch, device=device)  # (N,) original index of each live sentence
    ranks = torch.arange(2 * k, device=device)  # (2k,)
    for t in range(int(limits.max())):
        logits, cache, _ = model.step(tokens, cache)  # (N*g, V) fp32, a fresh tensor; g = 1, then k
        if t == 0:
            cache = cache.expand_beams(k)
        at_limit = (limits[alive] <= t + 1).repeat_interleave(scores.size(1))  # (N*g,) only EOS may follow
        top_scores, top_tokens, top_rows = _best_extensions(logits, scores, at_limit, k)  # each (N, 2k)
        possible, is_eos = top_scores > float("-inf"), top_tokens == EOS_ID  # (N, 2k) each
        # An EOS outside the top k would never have been kept by greedy search: drop it.
        ended = is_eos & possible & (ranks < k)  # (N, 2k)
        _collect(finished, ended, alive, top_scores, top_rows, history, alpha)
        n_finished += ended.sum(-1)
        going_on = ~is_eos & possible  # (N, 2k)
        chosen = going_on & (going_on.cumsum(-1) <= k)  # (N, 2k) the best k that go on
        keep = (n_finished < k) & (chosen.sum(-1) == k)  # (N,)
        if not bool(keep.any()):
            break
        positions = chosen[keep].nonzero()[:, 1].view(-1, k)  # (N', k) exactly k per kept sentence
        rows = top_rows[keep].gather(1, positions).view(-1)  # (N'*k,)
        tokens = top_tokens[keep].gather(1, positions).view(-1)  # (N'*k,)
        scores = top_scores[keep].gather(1, positions)  # (N', k)
        history = torch.cat([history[rows], tokens.unsqueeze(1)], dim=1)  # (N'*k, t+1)
        # Dropping finished sentences needs a full select; beams only reorder self-attention.
        cache = cache.reorder(rows) if bool(keep.all()) else cache.select(rows)
        alive, n_finished = alive[keep], n_finished[keep]
    return [sorted(hyps, key=lambda h: -h.score)[:n_best] for hyps in finished]


def _start_beams(batch: int, k: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Summed log-probs (B, 1) of the one hypothesis per sentence before step 1, the token history
    (B*k, 0) of the k beams per sentence it becomes, and the first input tokens (B,)."""
    scores = torch.zeros((batch, 1), device=device)  # (B, 1)
    history = torch.full((batch * k, 0), BOS_ID, dtype=torch.long, device=device)  # (B*k, t)
    tokens = torch.full((batch,), BOS_ID, dtype=torch.long, device=device)  # (B,)
    return scores, history, tokens


def _best_extensions(
    logits: torch.Tensor, scores: torch.Tensor, at_limit: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each live sentence's best 2k extensions, best first: (summed log-probs, tokens, the row
    of the hypothesis each extends, numbered k per sentence), each (N, 2k), from ``logits``
    (N*g, V) and ``scores`` (N, g) of g hypotheses per sentence (1 at the first step, else k).
    Rows ``at_limit`` may only end (EOS).

    Every extension's summed log-probability is written over ``log_probs`` in place, and one
    top-k runs over each sentence's g*V of them, as CTranslate2 ranks them: the top-k of each
    row and then of the sentence's g*2k took 1.4x as long (torch's CPU top-k costs ~1 ns an
    element however few it keeps). The same additions, so the same scores.
    """
    sentences, vocab = scores.size(0), logits.size(-1)
    # One fused kernel; logsumexp and a subtraction took two more passes over (N*g, V).
    log_probs = logits.log_softmax(-1)  # (N*g, V)
    # After normalising, as Hugging Face bans Marian's pad: the other tokens keep their log-probs.
    log_probs[:, NEVER_OUTPUT] = float("-inf")
    if bool(at_limit.any()):
        eos_only = _eos_only(vocab, logits.device)
        log_probs[at_limit] = log_probs[at_limit].where(eos_only, float("-inf"))
    sums = log_probs.add_(scores.view(-1, 1)).view(sentences, -1)  # (N, g*V) summed log-probs
    top_scores, top_ids = sums.topk(2 * k, dim=-1)  # (N, 2k), best first
    top_tokens = top_ids % vocab  # (N, 2k)
    beams = top_ids // vocab  # (N, 2k) which of its sentence's g hypotheses each extends
    top_rows = beams + torch.arange(sentences, device=logits.device).unsqueeze(1) * k  # (N, 2k)
    return top_scores, top_tokens, top_rows


def _collect(
    finished: list[list[Found]],
    ended: torch.Tensor,
    alive: torch.Tensor,
    top_scores: torch.Tensor,
    top_rows: torch.Tensor,
    history: torch.Tensor,
    alpha: float,
) -> None:
    """Append the hypotheses marked in ``ended`` (N, 2k) to their sentences' finished lists."""
    sentences = alive.unsqueeze(1).expand_as(ended)[ended].tolist()
    scores = top_scores[ended].tolist()
    words = history[top_rows[ended]].tolist()  # each without BOS, before the EOS
    for sentence, score, tokens in zip(sentences, scores, words):
        finished[sentence].append(Found(tokens, normalised(score, len(tokens), alpha)))


def _eos_only(vocab: int, device: torch.device) -> torch.Tensor:
    allowed = torch.zeros(vocab, dtype=torch.bool, device=device)  # (V,)
    allowed[EOS_ID] = True
    return allowed
