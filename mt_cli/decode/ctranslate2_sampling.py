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

from mt_cli.config.options import TranslateOptions
from mt_cli.decode.sampling import draw, line_seed, truncated_distribution
from mt_cli.decode.search import length_penalty
from mt_cli.specials import EOS_ID

if TYPE_CHECKING:
    from mt_cli.decode.ctranslate2 import CTranslate2Engine


def sample(
    engine: CTranslate2Engine,
    sources: Sequence[list[int]],
    lines: Sequence[str],
    limit: int,
    options: TranslateOptions,
) -> list[tuple[list[str], float]]:
    """One sample per source (piece ids without EOS, all sharing the output ``limit``, EOS
    included): its target pieces and its score (summed log-probability under the model,
    untempered, divided by the length penalty, as mt's engine scores a sample)."""
    sampling = options.sampling
    assert sampling is not None  # the caller samples only when asked to
    pieces = [engine.src_tok.sp.id_to_piece(ids) for ids in sources]
    generators = [torch.Generator().manual_seed(line_seed(sampling.seed, line)) for line in lines]
    prefixes: list[list[int]] = [[] for _ in sources]
    totals = [0.0] * len(sources)
    alive = list(range(len(sources)))
    for step in range(limit):
        results = engine.translator.translate_batch(
            [pieces[i] for i in alive],
            target_prefix=[engine.tgt_tok.sp.id_to_piece(prefixes[i]) for i in alive],
            beam_size=1,
            max_decoding_length=step + 1,  # the forced prefix and one more word
            return_logits_vocab=True,
            max_batch_size=engine.card.decode.max_tokens,
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
        (engine.tgt_tok.sp.id_to_piece(ids), total / length_penalty(len(ids) + 1, options.alpha))
        for ids, total in zip(prefixes, totals)
    ]
