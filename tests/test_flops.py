"""model/flops.py and runtime/flops.py: the model FLOPs of a training step and the device peak (MFU)."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from mt_cli.config.sections import ModelConfig
from mt_cli.data.batch import collate
from mt_cli.model.flops import training_flops
from mt_cli.model.transformer import build_model
from mt_cli.runtime import flops as peaks
from mt_cli.specials import BOS_ID, EOS_ID


@pytest.mark.parametrize("layers", [(2, 3), (3, 1)])
def test_training_flops_equal_what_torch_counts_in_forward_and_backward(layers: tuple[int, int]) -> None:
    cfg = ModelConfig(d_model=64, n_heads=4, d_ff=96, encoder_layers=layers[0], decoder_layers=layers[1])
    model = build_model(cfg, 300, 200)
    # Equal lengths: no padding, so what the kernels compute is what the model needs.
    batch = collate([[7] * 11 + [EOS_ID]] * 3, [[BOS_ID] + [8] * 6 + [EOS_ID]] * 3)
    # The math backend runs attention as matrix products the counter sees.
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask).float().sum().backward()
    assert training_flops(cfg, 200, *batch.sentence_lengths()) == counter.get_total_flops()


def test_padding_is_not_counted() -> None:
    cfg = ModelConfig(d_model=32, n_heads=2, d_ff=64, encoder_layers=1, decoder_layers=1)
    short, long = (
        collate([[7, EOS_ID]], [[BOS_ID, 8, EOS_ID]]),
        collate([[7] * 9 + [EOS_ID]], [[BOS_ID] + [8] * 9 + [EOS_ID]]),
    )
    both = collate([[7, EOS_ID], [7] * 9 + [EOS_ID]], [[BOS_ID, 8, EOS_ID], [BOS_ID] + [8] * 9 + [EOS_ID]])
    alone = [training_flops(cfg, 100, *b.sentence_lengths()) for b in (short, long)]
    assert training_flops(cfg, 100, *both.sentence_lengths()) == sum(alone)


def test_the_peak_comes_from_the_datasheet_on_known_gpus_and_is_measured_on_cpus(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    assert peaks.peak_flops(torch.device("cuda"), torch.bfloat16) == (
        989.4e12,
        "NVIDIA H100 80GB HBM3 datasheet",
    )
    assert peaks.peak_flops(torch.device("cuda"), None)[0] == pytest.approx(66.9e12)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 PCIe")
    assert peaks.peak_flops(torch.device("cuda"), torch.bfloat16)[0] == pytest.approx(756e12)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Some Future GPU")
    assert peaks.peak_flops(torch.device("cuda"), torch.bfloat16)[0] is None
    monkeypatch.setattr(peaks, "MATMUL_SIZE", 256)
    peaks.measured_matmul_flops.cache_clear()  # measured here, not taken from an earlier test
    state = torch.get_rng_state()
    flops, source = peaks.peak_flops(torch.device("cpu"), None)
    assert source == "measured matmul peak" and 1e8 < flops < 1e14
    assert torch.equal(torch.get_rng_state(), state)  # training's random stream is left alone
    peaks.measured_matmul_flops.cache_clear()  # later tests measure at full size again
