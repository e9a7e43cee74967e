"""Beam search that must write given token sequences (a glossary's target terms): lexically
constrained decoding with banks, as Post and Vilar's dynamic beam allocation (2018) and its
vectorised form in fairseq (Hu et al. 2019).

Each hypothesis knows which of its sentence's constraints it has written (``_State``) and how
far it is into one it has begun. Each step its sentence's candidates are the best 2k extensions,
as in ``search.beam_search``, and for every hypothesis the next token of the constraint it is
in, or the first token of each it has not written: a hypothesis can always step towards its
constraints. A constraint begun is written whole: where a hypothesis could leave one half-way,
every "snow" in a sentence counted towards "snowmobile" and the search filled the beam with them
(on test2016 with its term set: 1 BLEU less, and slower). The k kept are taken from banks by
progress (constraint tokens written), best first in each, one bank after the other from the most
advanced, so that hypotheses that wrote more of the constraints are not crowded out by likelier
ones that wrote less. A hypothesis ends (EOS) only once it holds every constraint; at the
sentence's length limit it ends anyway, and that hypothesis is a miss (``Constrained.missed``),
ranked after every one that holds them. A term ends a word: right after its last token the
pieces that would lengthen that word (``word_continuations``: "s" after "stick") are barred, so
that "stick" is not met by "sticks" or "snow" by "snowmobile". A sentence without constraints
is searched exactly as ``search.beam_search`` searches it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from mt_cli.decode.hypotheses import Decoder, Found, max_output_lengths, normalised
from mt_cli.specials import BOS_ID, EOS_ID, NEVER_OUTPUT

Constraints = Sequence[Sequence[int]]  # one sentence's: the token ids of each term it must hold


@dataclass(frozen=True)
class _State:
    """Which constraints a hypothesis holds, (constraint, tokens written) of one it is in, and
    whether its last token ended one."""

    met: frozenset[int] = frozenset()
    partial: tuple[int, int] | None = None
    term_ended: bool = False

    def next_tokens(self, constraints: Constraints) -> list[int]:
        """The tokens that step towards the constraints."""
        if self.partial is not None:
            which, done = self.partial
            return [constraints[which][done]]
        return list(dict.fromkeys(c[0] for i, c in enumerate(constraints) if i not in self.met))

    def after(self, token: int, constraints: Constraints) -> _State:
        """The state once ``token`` is written."""
        if self.partial is not None:
            which, done = self.partial
            if constraints[which][done] == token:
                if done + 1 == len(constraints[which]):
                    return _State(self.met | {which}, term_ended=True)
                return _State(self.met, (which, done + 1))
        for which, constraint in enumerate(constraints):  # a constraint begun (or begun again)
            if which not in self.met and constraint[0] == token:
                if len(constraint) == 1:
                    return _State(self.met | {which}, term_ended=True)
                return _State(self.met, (which, 1))
        return _State(self.met)

    def progress(self, constraints: Constraints) -> int:
        """Constraint tokens written: the hypothesis's bank."""
        return sum(len(constraints[i]) for i in self.met) + (self.partial[1] if self.partial else 0)

    def complete(self, constraints: Constraints) -> bool:
        return len(self.met) == len(constraints)


@dataclass
class Constrained:
    """The hypotheses of each sentence (best first, those holding every constraint before any
    miss) and whether its best misses a constraint (the length limit came first)."""

    found: list[list[Found]]
    missed: list[bool]


def holds(tokens: Sequence[int], constraint: Sequence[int]) -> bool:
    """Whether ``tokens`` hold ``constraint`` as a run of tokens (an empty one always)."""
    width = len(constraint)
    return (
        any(list(tokens[i : i + width]) == list(constraint) for i in range(len(tokens) - width + 1))
        or not width
    )


@torch.inference_mode()
def constrained_beam_search(
    model: Decoder,
    src: torch.Tensor,
    src_mask: torch.Tensor,
    constraints: Sequence[Constraints],
    beam_size: int,
    alpha: float,
    max_len_a: float,
    max_len_b: int,
    n_best: int = 1,
    word_continuations: Sequence[int] = (),
) -> Constrained:
    """Beam search of ``src`` (B, S) whose hypotheses each hold their sentence's ``constraints``,
    none of them followed by a piece of ``word_continuations``."""
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best={n_best} must be between 1 and beam_size={beam_size}")
    batch, k, device = src.size(0), beam_size, src.device
    limits = max_output_lengths(model, src_mask, max_len_a, max_len_b).tolist()  # (B,)
    cache = model.start_cache(model.encode(src, src_mask), src_mask)
    scores = torch.zeros((batch, 1), device=device)  # (N, g)
    history = torch.zeros((batch * k, 0), dtype=torch.long, device=device)  # (N*k, t)
    tokens = torch.full((batch,), BOS_ID, dtype=torch.long, device=device)  # (N*g,)
    states = [_State() for _ in range(batch)]  # (N*g,)
    # Per sentence: (holds every constraint, hypothesis) of each that ended.
    finished: list[list[tuple[bool, Found]]] = [[] for _ in range(batch)]
    alive = list(range(batch))
    continuations = torch.tensor(word_continuations, dtype=torch.long, device=device)  # (C,)
    for t in range(max(limits)):
        logits, cache, _ = model.step(tokens, cache)  # (N*g, V)
        if t == 0:
            cache = cache.expand_beams(k)
        g = scores.size(1)
        sums = _summed(logits, scores, [limits[i] <= t + 1 for i in alive for _ in range(g)])  # (N*g, V)
        _end_words(sums, states, continuations)
        candidates = _candidates(sums, states, [constraints[i] for i in alive], g, k)
        rows, next_tokens, next_scores, next_states, kept = [], [], [], [], []
        for j, sentence in enumerate(alive):
            chosen = _step_sentence(
                candidates[j], states, constraints[sentence], history, alpha, k, finished[sentence]
            )
            if chosen is None or len(finished[sentence]) >= k:
                continue
            kept.append(j)
            for score, row, token, state in chosen:
                rows.append(j * k + row - j * g)  # the row of the k the cache holds per sentence
                next_tokens.append(token)
                next_scores.append(score)
                next_states.append(state)
        if not kept:
            break
        index = torch.tensor(rows, device=device)  # (N'*k,)
        tokens = torch.tensor(next_tokens, device=device)  # (N'*k,)
        scores = torch.tensor(next_scores, device=device).view(len(kept), k)  # (N', k)
        history = torch.cat([history[index], tokens.unsqueeze(1)], dim=1)  # (N'*k, t+1)
        cache = cache.reorder(index) if len(kept) == len(alive) else cache.select(index)
        alive, states = [alive[j] for j in kept], next_states
    return _results(finished, n_best)


def _summed(logits: torch.Tensor, scores: torch.Tensor, at_limit: list[bool]) -> torch.Tensor:
    """Every extension's summed log-probability (N*g, V); rows at their limit may only end."""
    log_probs = logits.log_softmax(-1)  # (N*g, V)
    log_probs[:, NEVER_OUTPUT] = float("-inf")
    if any(at_limit):
        limited = torch.tensor(at_limit, device=logits.device)
        eos = log_probs[limited, EOS_ID].clone()
        log_probs[limited] = float("-inf")
        log_probs[limited, EOS_ID] = eos
    return log_probs.add_(scores.view(-1, 1))


def _end_words(sums: torch.Tensor, states: list[_State], continuations: torch.Tensor) -> None:
    """Bar ``continuations`` (C,) in ``sums`` (N*g, V) for the rows whose last token ended a term."""
    ended = [row for row, state in enumerate(states) if state.term_ended]
    if ended and continuations.numel():
        rows = torch.tensor(ended, device=sums.device)  # (E,)
        sums[rows.unsqueeze(1), continuations.unsqueeze(0)] = float("-inf")  # (E, C)


def _candidates(
    sums: torch.Tensor, states: list[_State], constraints: list[Constraints], g: int, k: int
) -> list[list[tuple[float, int, int]]]:
    """Each live sentence's candidates (summed log-prob, row, token): its best 2k extensions and
    each hypothesis's steps towards its constraints; rows count k per sentence, as the next
    step's do."""
    sentences, vocab = len(constraints), sums.size(-1)
    top_scores, top_ids = sums.view(sentences, -1).topk(2 * k, dim=-1)  # (N, 2k)
    forced = [(j, j * g + b, token) for j in range(sentences) for b in range(g)
              for token in states[j * g + b].next_tokens(constraints[j])]  # fmt: skip
    forced_scores = sums[[r for _, r, _ in forced], [t for _, _, t in forced]].tolist() if forced else []
    found: list[list[tuple[float, int, int]]] = []
    for j, (row_scores, row_ids) in enumerate(zip(top_scores.tolist(), top_ids.tolist(), strict=True)):
        found.append([(s, j * g + i // vocab, i % vocab) for s, i in zip(row_scores, row_ids, strict=True)])
    for (j, row, token), score in zip(forced, forced_scores, strict=True):
        found[j].append((score, row, token))
    return found


def _step_sentence(
    candidates: list[tuple[float, int, int]],
    states: list[_State],
    constraints: Constraints,
    history: torch.Tensor,
    alpha: float,
    k: int,
    finished: list[tuple[bool, Found]],
) -> list[tuple[float, int, int, _State]] | None:
    """One sentence's step: the hypotheses that end (EOS within its best k candidates, holding
    every constraint or at the length limit) join ``finished``; the k that go on, as (score,
    row, token, state) best first, or None when none can."""
    distinct = {(row, token): score for score, row, token in candidates if score > float("-inf")}
    ranked = sorted(distinct.items(), key=lambda item: -item[1])
    at_limit = all(token == EOS_ID for (_, token), _ in ranked)  # only EOS is left: the limit
    going: list[tuple[float, int, int, _State, int]] = []
    for rank, ((row, token), score) in enumerate(ranked):
        state = states[row]
        if state.partial is not None and token != state.next_tokens(constraints)[0]:
            continue  # a term begun is written whole
        if token == EOS_ID:
            complete = state.complete(constraints)
            if rank < k and (complete or at_limit):
                words = history[row].tolist() if history.size(1) else []  # without BOS, before EOS
                finished.append((complete, Found(words, normalised(score, len(words), alpha))))
            continue
        after = state.after(token, constraints)
        going.append((score, row, token, after, after.progress(constraints)))
    chosen = _by_banks(going, k)
    if not chosen:
        return None
    # Fewer than k can go on (each begun term allows one token): the rest are -inf copies, never kept.
    chosen += [(float("-inf"), *chosen[-1][1:])] * (k - len(chosen))
    return [(score, row, token, state) for score, row, token, state, _ in chosen]


def _by_banks(
    going: list[tuple[float, int, int, _State, int]], k: int
) -> list[tuple[float, int, int, _State, int]]:
    """k of ``going`` (best first): the best of each bank (progress) in turn, from the most
    advanced, until k are taken; with one bank, the best k."""
    banks: dict[int, list[tuple[float, int, int, _State, int]]] = {}
    for candidate in going:  # in score order
        banks.setdefault(candidate[4], []).append(candidate)
    order = sorted(banks, reverse=True)
    chosen: list[tuple[float, int, int, _State, int]] = []
    depth = 0
    while len(chosen) < k and any(depth < len(banks[level]) for level in order):
        for level in order:
            if depth < len(banks[level]) and len(chosen) < k:
                chosen.append(banks[level][depth])
        depth += 1
    return sorted(chosen, key=lambda candidate: -candidate[0])


def _results(finished: list[list[tuple[bool, Found]]], n_best: int) -> Constrained:
    """Each sentence's ``n_best``: those holding every constraint first, each group by score."""
    ranked = [
        sorted(hyps, key=lambda h: (not h[0], -h[1].score)) or [(False, Found([], float("-inf")))]
        for hyps in finished
    ]
    return Constrained(
        [[hyp for _, hyp in hyps[:n_best]] for hyps in ranked],
        [bool(hyps) and not hyps[0][0] for hyps in ranked],
    )
