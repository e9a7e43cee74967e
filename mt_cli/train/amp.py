"""``train.amp: auto`` on a CPU: the precision that updates this model faster here, measured.

A CPU with native bf16 (AVX512-BF16, AMX) runs bf16 matrix products in hardware, but whether a
whole update is faster in bf16 depends on more than the instruction set: the casts, the dropout
draws and the kernels' choices for the run's shapes. On 2-core AMD Zen 4/5 an update of the default
recipe is 1.2-1.5x faster in bf16; on a 2-core Intel Xeon with AMX (family 6 model 207) the same
recipe trained at 5.5-6.3k tokens/s in bf16 against 7.2-7.4k in fp32. So ``auto`` times forward and
backward passes of the run's own model on a synthetic batch of the run's token budget in both, and
keeps bf16 only where it is at least ``MARGIN`` faster: fp32 is the more exact of the two.

The measurement draws its dropout masks from a forked RNG and clears the gradients it made, so the
run trains as it would have without it; under DDP the ranks vote, so all train in one precision.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from mt_cli.data.batch import Batch, collate
from mt_cli.model.loss import token_loss
from mt_cli.runtime.device import autocast
from mt_cli.runtime.distributed import Distributed

MARGIN = 1.10  # bf16 must take at most 1/MARGIN of fp32's time per update to be chosen
LENGTH = 24  # pieces per synthetic sentence, on each side: a Multi30k caption's length
ROUNDS = 3  # timed passes per precision, interleaved, after one untimed pass of each


def synthetic_batch(model: nn.Module, max_tokens: int) -> Batch:
    """A batch of random pieces filling ``max_tokens`` (source + target) with sentences of LENGTH."""
    generator = torch.Generator().manual_seed(0)
    sentences = max(1, max_tokens // (2 * LENGTH))
    src_vocab, tgt_vocab = model.src_embed.num_embeddings, model.tgt_embed.num_embeddings
    first = 4  # past the special ids: real pieces
    src = torch.randint(first, src_vocab, (sentences, LENGTH), generator=generator).tolist()
    tgt = torch.randint(first, tgt_vocab, (sentences, LENGTH), generator=generator).tolist()
    return collate(src, tgt)


def seconds_per_update(model: nn.Module, batch: Batch, dtype: torch.dtype | None) -> Callable[[], float]:
    """A function timing one forward and backward pass of ``model`` on ``batch`` in ``dtype``."""
    device = torch.device("cpu")

    def timed() -> float:
        start = time.perf_counter()
        with autocast(device, dtype):
            logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)  # (B, T, V)
            loss = token_loss(logits, batch.tgt_out, 0.1)
        loss.backward()
        elapsed = time.perf_counter() - start
        model.zero_grad(set_to_none=True)
        return elapsed

    return timed


def measured_cpu_amp(
    model: nn.Module, max_tokens: int, dist: Distributed, log: Callable[[str], None]
) -> torch.dtype | None:
    """bf16 or None (fp32) for ``train.amp: auto`` on a CPU with native bf16, by measurement."""
    batch = synthetic_batch(model, max_tokens)
    passes = {
        None: seconds_per_update(model, batch, None),
        torch.bfloat16: seconds_per_update(model, batch, torch.bfloat16),
    }
    times: dict[torch.dtype | None, list[float]] = {dtype: [] for dtype in passes}
    was_training = model.training
    model.train()
    with torch.random.fork_rng(devices=[]):
        for timed in passes.values():
            timed()  # the first pass of each builds its kernels' plans: not timed
        for _ in range(ROUNDS):
            for dtype, timed in passes.items():
                times[dtype].append(timed())
    model.train(was_training)
    fp32, bf16 = statistics.median(times[None]), statistics.median(times[torch.bfloat16])
    faster_in_bf16 = bf16 * MARGIN <= fp32
    votes = dist.sum(int(faster_in_bf16))
    chosen = torch.bfloat16 if 2 * votes > dist.world_size else None
    log(
        f"train.amp auto: a {max_tokens}-token update took {1000 * bf16:.0f} ms in bf16 and "
        f"{1000 * fp32:.0f} ms in fp32 on this CPU; training in {'bf16' if chosen else 'fp32'}"
    )
    return chosen
