"""Greedy and beam search over a ``Transformer`` with its KV cache.

Shapes: B sentences, k beams, S source positions, V target vocabulary. Inputs are a padded
source ``src`` (B, S) and its mask ``src_mask`` (B, 1, 1, S), True = real token. The encoder
runs once per batch; every step feeds one token per live hypothesis and reuses the cached
keys/values. Finished sentences leave the batch, so they cost nothing afterwards.

Outputs are token ids without BOS/EOS; turning them into text is the translator's job.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mt_cli.model import Transformer
from mt_cli.tokenizer import BOS_ID, EOS_ID


@dataclass(frozen=True)
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # sum of log-probabilities divided by the length penalty


def max_output_lengths(model: Transformer, src_mask: torch.Tensor, a: float, b: int) -> torch.Tensor:
    """Per-sentence limit on generated tokens (EOS included): a * source length + b."""
    src_lengths = src_mask.view(src_mask.size(0), -1).sum(-1)  # (B,)
    limit = (a * src_lengths.float()).floor().long() + b
    return limit.clamp(min=1, max=model.max_positions - 1)  # BOS takes one position


def length_penalty(length: int, alpha: float) -> float:
    """GNMT (Wu et al. 2016): ((5 + |Y|) / 6) ** alpha; alpha 0 turns it off."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.inference_mode()
def greedy_search(
    model: Transformer, src: torch.Tensor, src_mask: torch.Tensor, max_len_a: float, max_len_b: int
) -> list[list[int]]:
    """The most probable next token at each step, batched, with the KV cache.

    Finished rows keep being fed (their output after EOS is cut off) until a quarter of the
    batch has finished; then the batch is compacted. Compacting at every finished sentence
    would copy every layer's cache at almost every step, which costs more than it saves.
    """
    batch = src.size(0)
    limits = max_output_lengths(model, src_mask, max_len_a, max_len_b).cpu()  # (B,)
    memory = model.encode(src, src_mask)  # (B, S, D)
    cache = model.start_cache(memory, src_mask)
    out = torch.full((batch, int(limits.max())), EOS_ID, dtype=torch.long)  # (B, T)
    alive = torch.arange(batch)  # original row of each row still in the batch
    done = torch.zeros(batch, dtype=torch.bool)  # (B_alive,) has produced EOS
    tokens = torch.full((batch,), BOS_ID, dtype=torch.long, device=src.device)  # (B_alive,)
    for t in range(out.size(1)):
        logits, cache, _ = model.step(tokens, cache)  # (B_alive, V)
        next_tokens = logits.float().log_softmax(-1).argmax(-1)  # same rule as beam search
        next_tokens = torch.where((limits[alive] <= t + 1).to(src.device), EOS_ID, next_tokens)
        next_cpu = next_tokens.cpu()
        out[alive, t] = torch.where(done, EOS_ID, next_cpu)
        done |= next_cpu == EOS_ID
        if done.all():
            break
        if 4 * int(done.sum()) >= len(done):
            keep = (~done).nonzero().squeeze(1)
            alive, done = alive[keep], done[keep]
            cache = cache.select(keep.to(src.device))
            next_tokens = next_tokens[keep.to(src.device)]
        tokens = next_tokens
    return [_until_eos(row) for row in out.tolist()]


def _until_eos(row: list[int]) -> list[int]:
    return row[: row.index(EOS_ID)] if EOS_ID in row else row


@torch.inference_mode()
def beam_search(
    model: Transformer,
    src: torch.Tensor,
    src_mask: torch.Tensor,
    beam_size: int,
    alpha: float,
    max_len_a: float,
    max_len_b: int,
    n_best: int = 1,
) -> list[list[Hypothesis]]:
    """Batched beam search; returns the ``n_best`` hypotheses per sentence, best first.

    A sentence is finished once ``beam_size`` hypotheses have ended with EOS (or it reached its
    length limit); finished sentences leave the batch. With ``beam_size=1`` this is exactly
    greedy search.
    """
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best={n_best} must be between 1 and beam_size={beam_size}")
    batch, k, device = src.size(0), beam_size, src.device
    limits = max_output_lengths(model, src_mask, max_len_a, max_len_b).tolist()
    memory = model.encode(src, src_mask)  # (B, S, D)
    cache = model.start_cache(memory, src_mask).select(torch.arange(batch, device=device).repeat_interleave(k))
    scores = torch.full((batch, k), float("-inf"), device=device)  # (B_alive, k) summed log-probs
    scores[:, 0] = 0.0  # all beams start identical: let only the first one expand
    history = torch.full((batch * k, 0), BOS_ID, dtype=torch.long, device=device)  # (B_alive*k, t)
    tokens = torch.full((batch * k,), BOS_ID, dtype=torch.long, device=device)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    alive = list(range(batch))  # original index of each live sentence
    for t in range(max(limits)):
        logits, cache, _ = model.step(tokens, cache)  # (B_alive*k, V)
        log_probs = logits.float().log_softmax(-1)  # (B_alive*k, V)
        at_limit = torch.tensor([t + 1 >= limits[s] for s in alive], device=device).repeat_interleave(k)
        log_probs[at_limit] = log_probs[at_limit].where(_eos_only(log_probs.size(-1), device), float("-inf"))
        vocab = log_probs.size(-1)
        candidates = (scores.view(-1, 1) + log_probs).view(len(alive), k * vocab)  # (B_alive, k*V)
        top_scores, top_ids = candidates.topk(2 * k, dim=-1)  # (B_alive, 2k)
        top_beams, top_tokens = top_ids // vocab, top_ids % vocab
        top_rows = top_beams + torch.arange(len(alive), device=device).unsqueeze(1) * k  # (B_alive, 2k)
        next_rows, next_tokens, next_scores, keep = [], [], [], []
        cpu = (top_scores.tolist(), top_tokens.tolist(), top_rows.tolist())
        for i, sentence in enumerate(alive):
            chosen = 0
            for rank, (score, token, row) in enumerate(zip(cpu[0][i], cpu[1][i], cpu[2][i])):
                if score == float("-inf"):
                    break
                if token == EOS_ID:
                    if rank < k:  # an EOS outside the top k would never have been kept by greedy
                        words = history[row].tolist()
                        length = len(words) + 1
                        finished[sentence].append(Hypothesis(words, score / length_penalty(length, alpha)))
                    continue
                if chosen < k:
                    next_rows.append(row)
                    next_tokens.append(token)
                    next_scores.append(score)
                    chosen += 1
            if len(finished[sentence]) < k and chosen == k:
                keep.append(i)
            else:
                del next_rows[len(next_rows) - chosen :], next_tokens[len(next_tokens) - chosen :]
                del next_scores[len(next_scores) - chosen :]
        if not keep:
            break
        rows = torch.tensor(next_rows, device=device)  # (B_keep*k,)
        history = torch.cat([history[rows], torch.tensor(next_tokens, device=device).unsqueeze(1)], dim=1)
        scores = torch.tensor(next_scores, device=device).view(len(keep), k)
        tokens = history[:, -1]
        if len(keep) < len(alive):
            # Dropping finished sentences needs a full select; beams only reorder self-attention.
            cache = cache.select(rows)
        else:
            cache = cache.reorder(rows)
        alive = [alive[i] for i in keep]
    return [sorted(hyps, key=lambda h: -h.score)[:n_best] for hyps in finished]


def _eos_only(vocab: int, device: torch.device) -> torch.Tensor:
    allowed = torch.zeros(vocab, dtype=torch.bool, device=device)  # (V,)
    allowed[EOS_ID] = True
    return allowed


@torch.inference_mode()
def cross_attention(
    model: Transformer, src: torch.Tensor, src_mask: torch.Tensor, tokens: list[int]
) -> torch.Tensor:
    """Last decoder layer's cross-attention (mean over heads) while forcing ``tokens``.

    Returns (len(tokens) + 1, S): one row per generated token, EOS included; rows sum to 1.
    """
    memory = model.encode(src, src_mask)  # (1, S, D)
    cache = model.start_cache(memory, src_mask)
    rows = []
    for token in [BOS_ID, *tokens]:
        _, cache, attention = model.step(torch.tensor([token], device=src.device), cache, return_attention=True)
        rows.append(attention[0].float())  # (S,)
    return torch.stack(rows)  # (T, S)
