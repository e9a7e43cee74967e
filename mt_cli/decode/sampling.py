"""Ancestral sampling with temperature, top-k and top-p (nucleus), reproducible per line: the
search that ``config.options.Sampling`` describes.

A line's sample depends on the seed and the line only: each sentence draws from its own
``torch.Generator``, seeded by ``line_seed(seed, line)`` (a stable hash, unlike ``hash()``), and
takes exactly one uniform number per step, whatever else is in its batch, the batch's order or
the number of threads. What could still move a draw is the model's arithmetic, if a row's logits
differed in the last bits when batched with other (longer) sources: in fp32 that flips a draw only
when its uniform falls within ~1e-7 of a boundary of the distribution. bf16 rounds ~65,000 times
more coarsely, so there such a flip is that much likelier; the guarantee is tested in fp32.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import torch
from torch import Tensor

from mt_cli.config.options import Sampling
from mt_cli.decode.hypotheses import Decoder, Found
from mt_cli.decode.picking import one_per_row


def line_seed(seed: int, line: str) -> int:
    """The generator seed of one line: a stable hash of (seed, line), the same in every process
    and Python version (``hash()`` is salted per process), in [0, 2**63)."""
    digest = hashlib.sha256(f"{seed}\n{line}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def truncated_distribution(logits: Tensor, sampling: Sampling) -> Tensor:
    """The distribution ``sampling`` draws from, for logits (N, V): tempered, cut to top-k, then
    to top-p, renormalised; fp32 probabilities (N, V) with zeros outside the kept set. Each row
    depends on that row only.
    """
    logits = logits.float()  # (N, V)
    vocab = logits.size(-1)
    if sampling.temperature == 0.0:
        # The limit of temperature -> 0: all mass on the most probable token (the first, on ties).
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)  # (N, V)
    # Shifting by the row maximum first keeps a tiny temperature from making +inf (and NaN).
    scaled = (logits - logits.amax(-1, keepdim=True)) / sampling.temperature  # (N, V), max 0
    k = vocab if sampling.top_k is None else min(sampling.top_k, vocab)
    if k == vocab and sampling.top_p == 1.0:
        return scaled.softmax(-1)  # (N, V): nothing to cut, no sort
    values, order = scaled.topk(k, dim=-1)  # (N, k), most probable first
    if sampling.top_p < 1.0:
        probs = values.softmax(-1)  # (N, k): top-p applies to the distribution left by top-k
        # Keep a token while the mass before it is short of p: the smallest set reaching p, and
        # always the first token (nothing comes before it).
        before = probs.cumsum(-1) - probs  # (N, k)
        values = values.masked_fill(before >= sampling.top_p, float("-inf"))
    return torch.zeros_like(scaled).scatter_(-1, order, values.softmax(-1))  # (N, V)


def draw(probs: Tensor, uniforms: Tensor) -> Tensor:
    """Inverse-CDF draws: row i takes the token where its cumulative probability first exceeds
    ``uniforms[i]`` (in [0, 1)) times the row's total. probs (N, V), uniforms (N,) -> tokens (N,).

    Exact for any distribution (a zero-probability token is never chosen) and one uniform per row,
    so a row's draw depends on its own generator only.
    """
    cdf = probs.double().cumsum(-1)  # (N, V), fp64 so that tiny probabilities keep their share
    total = cdf[:, -1:]  # (N, 1), ~1 up to rounding
    target = uniforms.to(cdf).unsqueeze(1) * total  # (N, 1)
    # u * total may round up to total itself; stay strictly below it so a token is found.
    target = torch.minimum(target, torch.nextafter(total, torch.zeros_like(total)))
    return torch.searchsorted(cdf, target, right=True)[:, 0]  # (N,) first index with cdf > target


@torch.inference_mode()
def sample_search(
    model: Decoder,
    src: Tensor,
    src_mask: Tensor,
    max_len_a: float,
    max_len_b: int,
    sampling: Sampling,
    line_seeds: Sequence[int],
) -> list[Found]:
    """One sample per sentence, batched, with the KV cache; sentence i draws from a generator
    seeded with ``line_seeds[i]`` (see ``line_seed``).

    A ``Found``'s score is the summed log-probability of its tokens, EOS included, under the
    model's own distribution: untempered and untruncated (what ``scoring.force_decode`` gives for
    the same tokens), not the distribution it was drawn from. At the length limit EOS is forced,
    as in the other searches.
    """
    if len(line_seeds) != src.size(0):
        raise ValueError(f"{src.size(0)} sources but {len(line_seeds)} line seeds")
    generators = [torch.Generator().manual_seed(seed) for seed in line_seeds]

    def pick(logits: Tensor, rows: Tensor) -> Tensor:
        probs = truncated_distribution(logits, sampling)  # (N, V)
        # One uniform per row from that sentence's own generator (on the CPU, so the stream is
        # the same on any device); finished rows still in the batch draw too, from their own.
        uniforms = torch.stack(
            [torch.rand((), dtype=torch.float64, generator=generators[row]) for row in rows.tolist()]
        )  # (N,)
        return draw(probs, uniforms.to(logits.device))  # (N,)

    tokens, scores = one_per_row(model, src, src_mask, max_len_a, max_len_b, pick, scored=True)
    return [Found(t, s) for t, s in zip(tokens, scores)]
