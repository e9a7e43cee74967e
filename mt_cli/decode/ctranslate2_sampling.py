"""Sampling on the CTranslate2 engine with mt's sampler, so that a line's sample depends on the
seed and the line only, as on mt's engine.

CTranslate2 samples with one random generator per worker thread, seeded once when the thread
first draws (``ctranslate2.set_random_seed`` does not reseed it): a line's sample would depend on
which thread took its batch and on what that thread drew before. So CTranslate2 only computes
the next-token logits here, one call per step for every line still going (its prefix forced with
``target_prefix``, ``return_logits_vocab``), and ``sampling.truncated_distribution`` and
``sampling.draw`` choose the token with the line's own generator, exactly as ``sample_search``
does. In float32 the two engines therefore draw the same samples, except where their logits
differ in the last bits near the edge of a draw. The price: every step re-reads the line's prefix
(CTranslate2 keeps no cache between calls), so sampling costs about (length / 2) times a greedy
decode of the same lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from mt_cli.config.options import Sampling
from mt_cli.decode.hypotheses import normalised
from mt_cli.decode.sampling import draw, line_seed, truncated_distribution
from mt_cli.specials import EOS_ID
from mt_cli.text.tokenizer import Tokenizer

if TYPE_CHECKING:
    import ctranslate2


def sample(
    translator: ctranslate2.Translator,
    tgt_tok: Tokenizer,
    pieces: Sequence[list[str]],
    lines: Sequence[str],
    limit: int,
    sampling: Sampling,
    alpha: float,
    batch_tokens: int,
) -> list[tuple[list[str], float]]:
    """One sample per source of ``lines`` (``pieces``: its source pieces without EOS; all share the
    output ``limit``, EOS included) from ``translator``, whose target pieces are ``tgt_tok``'s,
    in batches of ``batch_tokens``: its target pieces and its score (summed log-probability under
    the model, untempered, divided by the length penalty ``alpha``, as mt's engine scores a sample)."""
    generators = [torch.Generator().manual_seed(line_seed(sampling.seed, line)) for line in lines]
    prefixes: list[list[int]] = [[] for _ in pieces]
    totals = [0.0] * len(pieces)
    alive = list(range(len(pieces)))
    for step in range(limit):
        results = translator.translate_batch(
            [pieces[i] for i in alive],
            target_prefix=[tgt_tok.to_pieces(prefixes[i]) for i in alive],
            beam_size=1,
            max_decoding_length=step + 1,  # the forced prefix and one more word
            return_logits_vocab=True,
            max_batch_size=batch_tokens,
            batch_type="tokens",
        )
        # Each result holds the logits of every position of its prefix and the next: the last.
        last = [torch.from_numpy(np.asarray(r.logits[0][step])) for r in results]  # each (V,)
        logits = torch.stack(last).float()  # (N, V)
        draws = [torch.rand((), dtype=torch.float64, generator=generators[i]) for i in alive]
        uniforms = torch.stack(draws)  # (N,)
        tokens = draw(truncated_distribution(logits, sampling), uniforms)  # (N,)
        if step + 1 >= limit:  # only EOS fits, as in mt's searches
            tokens = torch.full_like(tokens, EOS_ID)
        chosen = logits.log_softmax(-1).gather(1, tokens[:, None])[:, 0].double()  # (N,) untempered
        going_on = []
        for row, index in enumerate(alive):
            totals[index] += float(chosen[row])
            token = int(tokens[row])
            if token != EOS_ID:
                prefixes[index].append(token)
                going_on.append(index)
        alive = going_on
        if not alive:
            break
    return [
        (tgt_tok.to_pieces(ids), normalised(total, len(ids), alpha)) for ids, total in zip(prefixes, totals)
    ]
