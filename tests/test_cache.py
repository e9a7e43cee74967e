"""The KV cache: beams reorder only self-attention history; selecting drops whole sources."""

from __future__ import annotations

import pytest
import torch

from mt_cli.model.cache import DecoderCache, LayerCache


def _cache(batch: int) -> DecoderCache:
    def t(value: float, length: int) -> torch.Tensor:
        return (
            torch.arange(batch, dtype=torch.float32).view(batch, 1, 1, 1).expand(batch, 2, length, 4) + value
        )

    layer = LayerCache(t(0, 3), t(100, 3), t(200, 5), t(300, 5))
    return DecoderCache(
        [layer, layer], torch.arange(batch).view(batch, 1, 1, 1).expand(batch, 1, 1, 5) > -1, 3
    )


def test_cache_reorder_moves_only_self_attention_history() -> None:
    cache = _cache(4)
    index = torch.tensor([1, 1, 3, 2])
    new = cache.reorder(index)
    assert new.length == 3 and new.src_mask is cache.src_mask
    for layer in new.layers:
        assert layer.self_k[:, 0, 0, 0].tolist() == [1, 1, 3, 2]
        assert layer.self_v[:, 0, 0, 0].tolist() == [101, 101, 103, 102]
        assert layer.cross_k[:, 0, 0, 0].tolist() == [200, 201, 202, 203]
    assert cache.layers[0].self_k[:, 0, 0, 0].tolist() == [0, 1, 2, 3]  # the old cache is untouched


def test_cache_select_moves_everything() -> None:
    cache = _cache(3)
    expand = torch.arange(3).repeat_interleave(2)
    new = cache.select(expand).select(torch.tensor([0, 3, 5]))
    assert new.layers[0].self_k.shape[0] == 3 and new.src_mask.shape == (3, 1, 1, 5)
    for layer in new.layers:
        assert layer.self_k[:, 0, 0, 0].tolist() == [0, 1, 2]
        assert layer.cross_v[:, 0, 0, 0].tolist() == [300, 301, 302]


def test_cache_beams_share_cross_attention() -> None:
    cache = _cache(2).expand_beams(3)
    assert cache.beams == 3 and cache.layers[0].self_k.shape[0] == 6
    for layer in cache.layers:
        assert layer.self_k[:, 0, 0, 0].tolist() == [0, 0, 0, 1, 1, 1]
        assert layer.cross_k.shape[0] == 2  # one copy per source, not per beam
    kept = cache.select(torch.tensor([5, 3, 4]))  # source 1's beams, reordered
    assert kept.layers[0].self_k.shape[0] == 3 and kept.src_mask.shape == (1, 1, 1, 5)
    for layer in kept.layers:
        assert layer.self_k[:, 0, 0, 0].tolist() == [1, 1, 1]
        assert layer.cross_v[:, 0, 0, 0].tolist() == [301]
    with pytest.raises(ValueError, match="one hypothesis per source"):
        cache.expand_beams(2)


def test_reordered_and_selected_buffers_hold_the_history_and_room_for_one_step() -> None:
    batch, capacity, length = 4, 8, 3
    buffer = torch.randn(batch, 2, capacity, 4)  # (B, H, capacity, Dh): 3 positions used, 5 spare
    layer = LayerCache(buffer, buffer + 1, torch.zeros(batch, 2, 5, 4), torch.zeros(batch, 2, 5, 4))
    cache = DecoderCache([layer], torch.ones(batch, 1, 1, 5, dtype=torch.bool), length)
    index = torch.tensor([1, 1, 3, 2])
    for new, rows in (
        (cache.reorder(index), index),
        (cache.select(torch.tensor([2, 0])), torch.tensor([2, 0])),
    ):
        kept = new.layers[0]
        assert kept.self_k.shape == (len(rows), 2, length + 1, 4) and kept.self_k.is_contiguous()
        assert torch.equal(kept.self_k[:, :, :length], buffer[rows, :, :length])
        assert torch.equal(kept.self_v[:, :, :length], buffer[rows, :, :length] + 1)
