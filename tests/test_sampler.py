"""data/sampler.py: token-budget batches, per-epoch order and DDP shards."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from mt_cli.data.sampler import TokenBatchSampler, fill_batches
from mt_cli.errors import DataError


def test_fill_batches_packs_in_order_under_the_budget() -> None:
    widths = ([2, 2, 3, 3, 9], [1, 1, 1, 4, 1])
    # cost = sentences * (widest source + widest target)
    assert fill_batches(range(5), widths, 12) == [[0, 1, 2], [3], [4]]
    assert fill_batches([4, 0], widths, 5) == [[4], [0]]  # an item over the budget: a batch of its own
    assert fill_batches([], widths, 5) == []
    assert fill_batches([0, 1, 2], ([3, 3, 3],), 9) == [[0, 1, 2]]


def _lengths(n: int = 2000, seed: int = 0) -> tuple[list[int], list[int]]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(2, 40, (n,), generator=g).tolist(), torch.randint(2, 45, (n,), generator=g).tolist()


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("shuffle", [True, False])
def test_each_pair_once_per_epoch_with_equal_counts(world_size: int, shuffle: bool) -> None:
    src, tgt = _lengths()
    for max_tokens in (600, 1000, 4096):
        samplers = [
            TokenBatchSampler(src, tgt, max_tokens, shuffle=shuffle, seed=3, rank=r, world_size=world_size)
            for r in range(world_size)
        ]
        for epoch in (0, 1):
            seen: Counter[int] = Counter()
            counts = set()
            for s in samplers:
                s.set_epoch(epoch)
                batches = list(s)
                counts.add(len(batches))
                assert len(batches) == len(s)
                seen.update(i for b in batches for i in b)
                for b in batches:  # budget, counting padding on both sides
                    assert (
                        len(b) == 1
                        or (max(src[i] for i in b) + max(tgt[i] for i in b)) * len(b) <= max_tokens
                    )
            assert len(counts) == 1
            assert seen == Counter(range(len(src)))


def test_remainder_batches_are_split_to_divide_evenly() -> None:
    src, tgt = [10] * 10, [10] * 10
    whole = TokenBatchSampler(src, tgt, 80, shuffle=False, seed=0)  # 4 per batch: 4+4+2
    assert [len(b) for b in whole] == [4, 4, 2]
    for ws in (2, 4, 5):
        sizes = [[len(b) for b in TokenBatchSampler(src, tgt, 80, False, 0, r, ws)] for r in range(ws)]
        assert len({len(s) for s in sizes}) == 1 and sum(map(sum, sizes)) == 10
    with pytest.raises(DataError, match="equal shares"):
        len(TokenBatchSampler([10] * 3, [10] * 3, 20, False, 0, 0, 2))


def test_oversized_pair_gets_its_own_batch() -> None:
    s = TokenBatchSampler([5, 200, 5], [5, 200, 5], 100, shuffle=False, seed=0)
    assert list(s) == [[0, 2], [1]]


def test_eval_mode_keeps_sorted_order() -> None:
    src, tgt = _lengths(500)
    s = TokenBatchSampler(src, tgt, 1000, shuffle=False, seed=0)
    flat = [i for b in s for i in b]
    assert flat == sorted(range(500), key=lambda i: (src[i], tgt[i], i))
    s.set_epoch(5)
    assert [i for b in s for i in b] == flat


def test_shuffle_is_seeded_per_epoch() -> None:
    src, tgt = _lengths()

    def epoch_batches(seed: int, epoch: int) -> list[list[int]]:
        s = TokenBatchSampler(src, tgt, 1000, shuffle=True, seed=seed)
        s.set_epoch(epoch)
        return list(s)

    assert epoch_batches(1, 0) == epoch_batches(1, 0)
    assert epoch_batches(1, 0) != epoch_batches(1, 1)
    assert epoch_batches(1, 0) != epoch_batches(2, 0)
