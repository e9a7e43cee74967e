"""The learning-rate schedules (step- and time-bound decay) and the optimizer."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from helpers import CONFIGS

from mt_cli.config.recipe import load_config
from mt_cli.config.sections import TrainConfig
from mt_cli.errors import ConfigError
from mt_cli.train.optim import decay_horizon, learning_rate, make_optimizer, parameter_groups

TINY = CONFIGS / "tiny.yaml"


def test_learning_rate_schedules() -> None:
    cfg = load_config(TINY, ["train.warmup_steps=100", "train.lr=1e-3"]).train
    assert learning_rate(50, cfg, 64) == pytest.approx(5e-4)
    assert learning_rate(100, cfg, 64) == pytest.approx(1e-3)
    assert learning_rate(400, cfg, 64) == pytest.approx(5e-4)  # 1/sqrt decay
    noam = load_config(TINY, ["train.schedule=noam", "train.warmup_steps=100", "train.lr=2"]).train
    assert learning_rate(100, noam, 64) == pytest.approx(2 * 64**-0.5 * 100**-0.5)
    for schedule, midpoint in (("cosine", 5e-4), ("linear", 5e-4)):
        cfg = load_config(
            TINY,
            [f"train.schedule={schedule}", "train.warmup_steps=100", "train.lr=1e-3", "train.max_steps=300"],
        ).train
        assert learning_rate(50, cfg, 64) == pytest.approx(5e-4)
        assert learning_rate(100, cfg, 64) == pytest.approx(1e-3)
        assert learning_rate(200, cfg, 64) == pytest.approx(midpoint)
        assert learning_rate(300, cfg, 64) == pytest.approx(0.0, abs=1e-12)
        assert learning_rate(400, cfg, 64) == pytest.approx(0.0, abs=1e-12)  # stays at zero past the end
    cfg = load_config(
        TINY, ["train.schedule=cosine", "train.warmup_steps=100", "train.lr=1e-3", "train.max_steps=1000"]
    ).train
    assert learning_rate(325, cfg, 64) == pytest.approx(1e-3 * 0.5 * (1 + math.cos(math.pi * 0.25)))
    assert learning_rate(325, cfg, 64) > 1e-3 * (1 - 0.25)  # cosine stays higher than linear early on
    with pytest.raises(ConfigError, match="max_steps"):
        load_config(TINY, ["train.schedule=cosine", "train.max_steps=0"])


def test_time_horizon_follows_the_measured_rate() -> None:
    cfg = load_config(
        TINY,
        [
            "train.schedule=cosine",
            "train.warmup_steps=100",
            "train.lr=1e-3",
            "train.max_steps=0",
            "train.max_minutes=10",
            "train.lr_horizon=max_minutes",
        ],
    ).train
    # 300 updates in half of the 600 s budget: the budget allows 600, so decay is 200/500 done.
    assert decay_horizon(300, cfg, 300.0) == pytest.approx(600)
    assert learning_rate(300, cfg, 64, 300.0) == pytest.approx(
        1e-3 * 0.5 * (1 + math.cos(math.pi * 200 / 500))
    )
    # A slower machine (150 updates in the same time) decays over fewer updates and still ends at zero.
    assert decay_horizon(150, cfg, 300.0) == pytest.approx(300)
    assert learning_rate(300, cfg, 64, 600.0) == pytest.approx(0.0, abs=1e-12)
    assert learning_rate(100, cfg, 64, 0.0) == pytest.approx(1e-3)  # nothing measured yet: no decay
    assert learning_rate(50, cfg, 64, 599.0) == pytest.approx(5e-4)  # warmup is counted in updates
    capped = replace(cfg, max_steps=500)
    assert decay_horizon(300, capped, 300.0) == 500  # max_steps still caps a fast machine
    by_steps = replace(cfg, max_steps=500, lr_horizon="max_steps")
    assert learning_rate(300, by_steps, 64, 300.0) == learning_rate(300, by_steps, 64, 0.0)


def test_time_horizon_config_rules() -> None:
    with pytest.raises(ConfigError, match="max_minutes"):
        load_config(
            TINY,
            [
                "train.schedule=cosine",
                "train.max_steps=500",
                "train.lr_horizon=max_minutes",
                "train.max_minutes=0",
            ],
        )
    with pytest.raises(ConfigError, match="max_steps"):
        load_config(TINY, ["train.lr_horizon=minutes"])
    cfg = load_config(
        TINY,
        ["train.schedule=cosine", "train.max_steps=0", "train.lr_horizon=max_minutes", "train.max_minutes=5"],
    ).train
    assert cfg.max_steps == 0  # no update cap needed when time ends the decay


def test_fused_adamw_matches_the_per_tensor_loop() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 16), torch.nn.LayerNorm(16))
    twin = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 16), torch.nn.LayerNorm(16))
    twin.load_state_dict(model.state_dict())
    start = model[1].weight.detach().clone()
    cfg = TrainConfig(lr=1e-2, weight_decay=0.1)
    fused = make_optimizer(model, cfg)
    assert fused.defaults["fused"]
    loop = torch.optim.AdamW(
        parameter_groups(twin, cfg),
        lr=cfg.lr,
        betas=cfg.optimizer_betas,
        eps=cfg.optimizer_eps,
        foreach=False,
    )
    tokens = torch.randint(0, 50, (8,))
    for _ in range(5):
        for net, optimizer in ((model, fused), (twin, loop)):
            net(tokens).square().sum().backward()
            optimizer.step()
            optimizer.zero_grad()
    for (name, a), b in zip(model.state_dict().items(), twin.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    assert (model[1].weight - start).abs().max() > 1e-2  # the updates were not no-ops
