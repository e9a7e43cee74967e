"""CUDA-only checks: fp16 with GradScaler and bf16 training steps, decoding on the GPU.

Skipped without a GPU; run with `pytest -m cuda` on a machine that has one.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from helpers import FAST_TRAINING, greedy_tokens

from mt_cli.checkpoint import Checkpoint
from mt_cli.config.recipe import load_config
from mt_cli.config.sections import ModelConfig, TrainConfig
from mt_cli.data.batch import collate, pad_sources
from mt_cli.decode.search import beam_search
from mt_cli.disk.layout import RunDir
from mt_cli.model.loss import token_loss
from mt_cli.model.transformer import build_model
from mt_cli.runtime.device import amp_dtype, autocast
from mt_cli.runtime.distributed import Distributed
from mt_cli.train.optim import make_optimizer
from mt_cli.train.trainer import Trainer

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

VOCAB = 64


def batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    src = [
        torch.randint(4, VOCAB, (int(n),), generator=g).tolist() + [3]
        for n in torch.randint(3, 12, (16,), generator=g)
    ]
    tgt = [[2] + s[:-1][::-1] + [3] for s in src]  # reverse task
    return collate(src, tgt).to("cuda")


def train_steps(dtype: torch.dtype, steps: int) -> tuple[list[float], torch.amp.GradScaler]:
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=64, n_heads=4, d_ff=128, encoder_layers=2, decoder_layers=2, dropout=0.0)
    model = build_model(cfg, VOCAB, VOCAB).cuda()
    optimizer = make_optimizer(model, TrainConfig(lr=3e-3))
    scaler = torch.amp.GradScaler("cuda", enabled=dtype == torch.float16)
    device = torch.device("cuda")
    losses = []
    for step in range(steps):
        b = batch(step % 4)
        with autocast(device, dtype):
            loss = token_loss(model(b.src, b.tgt_in, b.src_mask, b.tgt_mask), b.tgt_out, 0.1) / b.tgt_tokens
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses, scaler


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_amp_training_learns(dtype: torch.dtype) -> None:
    if dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    losses, scaler = train_steps(dtype, 150)
    assert all(math.isfinite(x) for x in losses)
    assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10 - 1.0
    if dtype == torch.float16:
        assert scaler.get_scale() > 0 and scaler.is_enabled()


def test_fp16_training_goes_through_the_trainers_gradient_scaler(
    tiny_config_path, tiny_corpus, tmp_path
) -> None:
    # The trainer's own update(): loss scaling, unscale before clipping, skipped non-finite steps.
    cfg = load_config(
        tiny_config_path, [*FAST_TRAINING, "train.device=cuda", "train.amp=fp16", "train.max_steps=30"]
    )
    run = RunDir(tmp_path)
    torch.manual_seed(cfg.train.seed)
    data = tiny_corpus.training_data(cfg)
    trainer = Trainer(cfg, run, data, Distributed(), log=lambda message: None)
    assert trainer.dtype == torch.float16 and trainer.scaler.is_enabled()
    initial_scale = trainer.scaler.get_scale()
    trainer.fit()
    losses = [json.loads(line)["loss"] for line in run.metrics.read_text().splitlines() if '"train"' in line]
    assert all(math.isfinite(x) for x in losses) and sum(losses[-5:]) < sum(losses[:5]) - 2.5
    assert trainer.progress.step == 30
    # The scaler ran: it either backed off after an overflow (a skipped step) or kept its scale.
    assert 0 < trainer.scaler.get_scale() <= initial_scale
    assert trainer.scaler.get_scale() < initial_scale or trainer.progress.skipped_steps == 0
    scaler = Checkpoint.load(run.last).scaler
    assert scaler is not None and scaler["scale"] == trainer.scaler.get_scale()


def test_amp_auto_prefers_bf16_on_capable_gpus() -> None:
    expected = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    assert amp_dtype(torch.device("cuda"), "auto") == expected
    assert amp_dtype(torch.device("cuda"), "fp16") == torch.float16


def test_training_attention_builds_no_cudnn_plan_per_batch_shape() -> None:
    # Batches of new shapes, as length-sorted training brings them: no cuDNN attention call (each
    # built an execution plan, ~8 ms of CPU on an H200; docs/benchmarks.md).
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    cfg = ModelConfig(d_model=64, n_heads=4, d_ff=128, encoder_layers=2, decoder_layers=2, dropout=0.0)
    model = build_model(cfg, VOCAB, VOCAB).cuda()
    device = torch.device("cuda")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for seed in range(3):
            b = batch(seed)
            with autocast(device, amp_dtype(device, "auto")):
                loss = token_loss(model(b.src, b.tgt_in, b.src_mask, b.tgt_mask), b.tgt_out, 0.1)
            loss.backward()
    names = {event.key for event in prof.key_averages()}
    assert not [name for name in names if "cudnn_attention" in name]
    assert [name for name in names if "efficient_attention" in name or "flash_attention" in name]


def test_decoding_on_gpu_matches_cpu() -> None:
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=64, n_heads=4, d_ff=128, encoder_layers=2, decoder_layers=2, dropout=0.0)
    model = build_model(cfg, VOCAB, VOCAB).eval()
    sources = [[5, 6, 7, 3], [9, 10, 3], [11, 12, 13, 14, 15, 3]]
    src, src_mask = pad_sources(sources)
    on_cpu = greedy_tokens(model, src, src_mask, 1.5, 5)
    model.cuda()
    on_gpu = greedy_tokens(model, src.cuda(), src_mask.cuda(), 1.5, 5)
    assert on_gpu == on_cpu
    beams = beam_search(model, src.cuda(), src_mask.cuda(), 1, 0.0, 1.5, 5)
    assert [h[0].tokens for h in beams] == on_gpu


def test_compiled_training_follows_the_eager_loss_curve_on_the_gpu(
    tiny_config_path, tiny_corpus, tmp_path
) -> None:
    # fp32 (TF32 off, torch's default) and no dropout: only kernel fusion and summation order differ.
    same = [
        *FAST_TRAINING,
        "train.device=cuda",
        "train.max_steps=12",
        "model.dropout=0",
        "model.src_token_dropout=0",
        "model.tgt_token_dropout=0",
    ]
    curves = []
    for compiled in ("false", "true"):
        cfg = load_config(tiny_config_path, [*same, f"train.compile={compiled}"])
        run = RunDir(tmp_path / compiled)
        run.root.mkdir(parents=True)
        torch.manual_seed(cfg.train.seed)
        Trainer(cfg, run, tiny_corpus.training_data(cfg), Distributed(), log=lambda message: None).fit()
        curves.append(
            [json.loads(line)["loss"] for line in run.metrics.read_text().splitlines() if '"train"' in line]
        )
    eager, compiled_losses = curves
    assert len(eager) == 12 and compiled_losses == pytest.approx(eager, rel=1e-3)


def test_an_update_queues_without_a_host_synchronisation(tiny_config_path, tiny_corpus, tmp_path) -> None:
    """torch.cuda.set_sync_debug_mode("error") raises at any call that waits for the GPU: an
    update that decides nothing (read one update late) must have none, batch copies included."""
    cfg = load_config(tiny_config_path, [*FAST_TRAINING, "train.device=cuda", "train.log_every_steps=100"])
    torch.manual_seed(cfg.train.seed)
    trainer = Trainer(cfg, RunDir(tmp_path), tiny_corpus.training_data(cfg), Distributed(), lambda m: None)
    groups = trainer.epoch_updates()
    trainer.update(next(groups))  # the first: the allocator's pools, fused AdamW's state
    trainer.settle()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            trainer.update(next(groups))  # each reads the one before after queueing its passes
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert trainer.settle().applied and trainer.progress.step == 4


def test_the_lagged_loop_and_padded_batches_train_as_the_plain_one(
    tiny_config_path, tiny_corpus, tmp_path
) -> None:
    # The same 20 updates read at once (the CPU's way) and one update late with padded widths and
    # is_causal attention; CUDA kernels are not bitwise reproducible, so the curves agree closely.
    curves = []
    for lag, pad in ((False, 1), (True, 64)):
        overrides = [*FAST_TRAINING, "train.device=cuda", "train.amp=off", "train.max_steps=20"]
        cfg = load_config(tiny_config_path, [*overrides, f"train.pad_to_multiple={pad}"])
        run = RunDir(tmp_path / str(lag))
        run.root.mkdir()
        torch.manual_seed(cfg.train.seed)
        trainer = Trainer(cfg, run, tiny_corpus.training_data(cfg), Distributed(), lambda m: None)
        trainer.lag_reads = lag
        trainer.fit()
        curves.append(
            [json.loads(line)["loss"] for line in run.metrics.read_text().splitlines() if '"train"' in line]
        )
    assert len(curves[0]) == len(curves[1]) == 20
    torch.testing.assert_close(torch.tensor(curves[1]), torch.tensor(curves[0]), rtol=2e-3, atol=2e-3)
