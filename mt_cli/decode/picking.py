"""One hypothesis per sentence, each next token picked by a rule, with the KV cache: greedy
search (``most_probable``) and sampling (``sampling``'s draws) share this loop.

Shapes as in ``search``: B sentences, S source positions, V target vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from mt_cli.decode.hypotheses import Decoder, max_output_lengths
from mt_cli.specials import BOS_ID, EOS_ID, NEVER_OUTPUT

# Greedy search drops finished sentences from the batch once 1/COMPACT_DIVISOR of it has
# finished. Each drop copies every layer's cache while it saves the finished rows' work; on
# test2016 the two balance: divisors 2 to 16 decode equally fast (docs/benchmarks.md).
COMPACT_DIVISOR = 4


# pick(scores (N, V), rows (N,)) -> next tokens (N,); rows: each live row's index in the batch.
Picker = Callable[[Tensor, Tensor], Tensor]


def most_probable(logits: Tensor, rows: Tensor) -> Tensor:
    """Greedy search's pick: the most probable next token of each row, (N, V) -> (N,). The
    argmax of the raw scores: log_softmax is monotonic, so they need no normalising."""
    return logits.argmax(-1)


@torch.inference_mode()  # no autograd graph of every step
def one_per_row(
    model: Decoder,
    src: torch.Tensor,
    src_mask: torch.Tensor,
    max_len_a: float,
    max_len_b: int,
    pick: Picker,
    scored: bool = False,
) -> tuple[list[list[int]], list[float]]:
    """One hypothesis per sentence, each next token chosen by ``pick`` (greedy, sampling), with
    the KV cache. Returns the tokens and, if ``scored``, each one's summed log-probability (EOS
    included) under the model's step distribution; else zeros (normalising costs time).

    Finished rows keep being fed (their output after EOS is cut off) until 1/COMPACT_DIVISOR
    of the batch has finished; then the batch is compacted.
    """
    batch = src.size(0)
    limits = max_output_lengths(model, src_mask, max_len_a, max_len_b).cpu()  # (B,)
    memory = model.encode(src, src_mask)  # (B, S, D)
    cache = model.start_cache(memory, src_mask)
    out = torch.full((batch, int(limits.max())), EOS_ID, dtype=torch.long)  # (B, T)
    totals = torch.zeros(batch, dtype=torch.float64)  # (B,) summed log-probabilities
    alive = torch.arange(batch)  # original row of each row still in the batch
    done = torch.zeros(batch, dtype=torch.bool)  # (B_alive,) has produced EOS
    tokens = torch.full((batch,), BOS_ID, dtype=torch.long, device=src.device)  # (B_alive,)
    for t in range(out.size(1)):
        logits, cache, _ = model.step(tokens, cache)  # (B_alive, V) fp32, a fresh tensor
        # The score is under the model's whole distribution, the choice among what may be output.
        normaliser = logits.logsumexp(-1) if scored else None  # (B_alive,)
        logits[:, NEVER_OUTPUT] = float("-inf")
        next_tokens = pick(logits, alive)  # (B_alive,)
        next_tokens = torch.where((limits[alive] <= t + 1).to(src.device), EOS_ID, next_tokens)
        next_cpu = next_tokens.cpu()
        if normaliser is not None:
            chosen = (logits.gather(1, next_tokens[:, None])[:, 0] - normaliser).cpu()  # (B_alive,)
            totals[alive] += torch.where(done, 0.0, chosen.double())
        out[alive, t] = torch.where(done, EOS_ID, next_cpu)
        done |= next_cpu == EOS_ID
        if done.all():
            break
        if COMPACT_DIVISOR * int(done.sum()) >= len(done):
            keep = (~done).nonzero().squeeze(1)
            alive, done = alive[keep], done[keep]
            cache = cache.select(keep.to(src.device))
            next_tokens = next_tokens[keep.to(src.device)]
        tokens = next_tokens
    return [_until_eos(row) for row in out.tolist()], totals.tolist()


def _until_eos(row: list[int]) -> list[int]:
    return row[: row.index(EOS_ID)] if EOS_ID in row else row
