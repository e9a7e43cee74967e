"""train/amp.py: ``train.amp: auto`` on a CPU chooses by measurement and leaves no trace."""

from __future__ import annotations

import torch
from helpers import random_model

from mt_cli.runtime.distributed import Distributed
from mt_cli.train import amp
from mt_cli.train.amp import measured_cpu_amp, synthetic_batch


def test_the_synthetic_batch_fills_the_token_budget_with_real_pieces() -> None:
    model = random_model()
    batch = synthetic_batch(model, 960)
    assert batch.n_sentences == 960 // (2 * amp.LENGTH)
    assert batch.src_tokens + batch.tgt_tokens == batch.n_sentences * (2 * amp.LENGTH - 1)
    assert int(batch.src.min()) >= 4 and int(batch.src.max()) < model.src_embed.num_embeddings


def test_the_measurement_changes_no_weight_gradient_or_random_draw() -> None:
    model = random_model()
    weights = {name: value.clone() for name, value in model.state_dict().items()}
    torch.manual_seed(7)
    expected_draw = torch.rand(3)
    torch.manual_seed(7)
    logged: list[str] = []
    measured_cpu_amp(model, 256, Distributed(), logged.append)
    assert torch.equal(torch.rand(3), expected_draw)  # the run's dropout stream is untouched
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(value, weights[name]) for name, value in model.state_dict().items())
    assert len(logged) == 1 and "ms in bf16" in logged[0] and "ms in fp32" in logged[0]


def test_bf16_is_chosen_only_where_it_is_measured_faster_by_the_margin(monkeypatch) -> None:
    def timings(bf16: float, fp32: float):
        def seconds_per_update(model, batch, dtype):
            return lambda: bf16 if dtype is torch.bfloat16 else fp32

        return seconds_per_update

    model, logged = random_model(), []
    for bf16, fp32, chosen in ((0.5, 1.0, torch.bfloat16), (1.0, 0.8, None), (1.0, 1.05, None)):
        monkeypatch.setattr(amp, "seconds_per_update", timings(bf16, fp32))
        assert measured_cpu_amp(model, 256, Distributed(), logged.append) == chosen
    assert logged[1].endswith("training in fp32") and logged[0].endswith("training in bf16")
