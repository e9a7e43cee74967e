"""The training loop: AMP, accumulation, clipping, validation, checkpoints, resume, DDP.

One update = ``accum_steps`` token-budget batches; the loss is summed over target tokens and
divided by the real (non-pad) target tokens of the whole update, across ranks, so gradients do
not depend on how the tokens were split into batches. The learning rate is a pure function of
the update number (and, with ``train.lr_horizon: max_minutes``, of the saved training seconds),
so resuming needs no scheduler state.
"""

from __future__ import annotations

import math
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F

from mt_cli.checkpoint import RunDir, load_checkpoint, save_checkpoint
from mt_cli.config import Config, config_to_dict, save_config
from mt_cli.data import Batch, TokenBatchSampler, collate, epoch_seed, pair_widths
from mt_cli.device import amp_dtype, autocast, resolve_device
from mt_cli.distributed import Distributed
from mt_cli.errors import CheckpointError, InputError, RunFailure
from mt_cli.model import build_model, count_parameters
from mt_cli.optim import learning_rate, make_optimizer
from mt_cli.preparation import TrainingData, prepare_training_data
from mt_cli.progress import LogFile, MetricsLog, Progress, capture_rng, restore_rng
from mt_cli.tokenizer import PAD_ID
from mt_cli.validation import Validator


class TrainingError(RunFailure):
    """Training cannot go on (e.g. the loss stayed non-finite)."""


class Interrupted(Exception):
    """SIGINT/SIGTERM arrived; ``last.pt`` was saved. The CLI exits 130 with the message."""


def token_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> torch.Tensor:
    """Summed cross-entropy over real target tokens; padding positions count for nothing."""
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),  # (B*T, V)
        target.reshape(-1),  # (B*T,)
        ignore_index=PAD_ID,
        label_smoothing=smoothing,
        reduction="sum",
    )


class Trainer:
    def __init__(
        self, cfg: Config, run: RunDir, data: TrainingData, dist: Distributed, log: Callable[[str], None]
    ):
        self.cfg, self.run, self.data, self.dist, self.log = cfg, run, data, dist, log
        tc = cfg.train
        self.device = dist.device(resolve_device(tc.device))
        self.dtype = amp_dtype(self.device, tc.amp)
        self.model = build_model(cfg.model, data.src_tok.vocab_size, data.tgt_tok.vocab_size).to(self.device)
        self.optimizer = make_optimizer(self.model, tc)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.dtype == torch.float16)
        self.progress = Progress()
        # This epoch's training ids: BPE-dropout replaces them at every epoch (see begin_epoch).
        self.train_src, self.train_tgt = data.train_src, data.train_tgt
        self.sampler = TokenBatchSampler(
            *pair_widths(self.train_src, self.train_tgt),
            tc.max_tokens,
            shuffle=True,
            seed=tc.seed,
            rank=dist.rank,
            world_size=dist.world_size,
        )
        self.validator = Validator(cfg, run, data, self.device, self.dtype, log)
        self.metrics = MetricsLog(run.metrics, enabled=dist.is_main)
        self.stop_signal: str | None = None
        self.ddp = dist.wrap(self.model)  # the model itself when not distributed
        self.forward = torch.compile(self.ddp) if tc.compile else self.ddp

    # ---- checkpoints -------------------------------------------------------------------
    def save_last(self) -> None:
        if not self.dist.is_main:
            return
        save_checkpoint(
            {
                "model": self.model.state_dict(),
                "config": config_to_dict(self.cfg),
                "optimizer": self.optimizer.state_dict(),
                "scaler": self.scaler.state_dict(),
                "progress": self.progress.as_dict(),
                "rng": capture_rng(),
                "step": self.progress.step,
            },
            self.run.last,
        )

    def resume(self) -> None:
        # On the CPU: the RNG states must stay CPU ByteTensors, and load_state_dict moves weights and
        # optimizer moments to the model's device itself.
        payload = load_checkpoint(self.run.last)
        for key in ("optimizer", "scaler", "progress", "rng"):
            if key not in payload:
                raise CheckpointError(f"{self.run.last} has no {key} state; it cannot be resumed")
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.scaler.load_state_dict(payload["scaler"])
        self.progress = Progress.from_dict(payload["progress"])
        restore_rng(payload["rng"])
        self.log(
            f"resumed from {self.run.last} at update {self.progress.step}, epoch {self.progress.epoch + 1}"
        )

    # ---- one update ----------------------------------------------------------------------
    def update(self, batches: list[Batch]) -> tuple[float, float]:
        """Forward, backward and one optimizer step; returns (loss per target token, grad norm)."""
        tc = self.cfg.train
        tokens = self.dist.sum(sum(b.tgt_tokens for b in batches))
        total_loss = 0.0
        for i, batch in enumerate(batches):
            batch = batch.to(self.device)
            sync = i == len(batches) - 1
            with self.dist.no_sync(self.ddp) if not sync else nullcontext():
                with autocast(self.device, self.dtype):
                    logits = self.forward(
                        batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask
                    )  # (B, T, V)
                    loss = token_loss(logits, batch.tgt_out, tc.label_smoothing)
                # DDP averages gradients over ranks; scale so the result is a per-token mean.
                self.scaler.scale(loss * self.dist.world_size / tokens).backward()
            total_loss += loss.item()
        self.scaler.unscale_(self.optimizer)
        max_norm = tc.clip_norm if tc.clip_norm > 0 else math.inf
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm))
        applied = math.isfinite(grad_norm)
        lr = learning_rate(self.progress.step + 1, tc, self.cfg.model.d_model, self.budget_used())
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        if applied or self.scaler.is_enabled():  # the fp16 scaler skips non-finite steps itself
            self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        if applied:
            self.progress.step += 1
            self.progress.bad_steps = 0
        else:
            self.progress.bad_steps += 1
            self.progress.skipped_steps += 1
            if self.progress.bad_steps >= tc.max_bad_steps:
                raise TrainingError(
                    f"the gradient was not finite for {tc.max_bad_steps} updates in a row at update "
                    f"{self.progress.step}; lower train.lr or use train.amp=bf16/off"
                )
        return total_loss / max(sum(b.tgt_tokens for b in batches), 1), grad_norm

    # ---- the loop --------------------------------------------------------------------------
    def begin_epoch(self) -> None:
        """Point the sampler at the saved position in the current epoch.

        With BPE-dropout the training pairs are first re-segmented, seeded by (seed, epoch) so
        that a resumed epoch gets the same pieces and hence the same batches.
        """
        p, k = self.progress, self.cfg.tokenizer
        if k.src_bpe_dropout or k.tgt_bpe_dropout:
            seed = epoch_seed(self.cfg.train.seed, p.epoch)
            self.train_src, self.train_tgt = self.data.segment_with_dropout(
                k.src_bpe_dropout, k.tgt_bpe_dropout, seed, self.cfg.data.max_len
            )
            self.sampler.set_lengths(*pair_widths(self.train_src, self.train_tgt))
        self.sampler.set_epoch(p.epoch)
        self.sampler.start_at(p.batch_in_epoch)

    def epoch_updates(self) -> Iterator[list[Batch]]:
        """The remaining updates of the current epoch, from the position ``begin_epoch`` set."""
        group: list[Batch] = []
        for indices in self.sampler:
            group.append(collate([self.train_src[i] for i in indices], [self.train_tgt[i] for i in indices]))
            if len(group) == self.cfg.train.accum_steps:
                yield group
                group = []
        if group:
            yield group

    def budget_used(self) -> float:
        """Seconds counted against ``max_minutes``: training so far plus the closing validation,
        reserved at what the last validation took, so that it still fits in the budget."""
        reserve = self.validator.last_result.seconds if self.validator.last_result else 0.0
        return self.progress.elapsed + reserve

    def should_stop(self) -> str | None:
        tc, p = self.cfg.train, self.progress
        reasons = [
            (self.stop_signal is not None, f"received {self.stop_signal}"),
            (tc.max_steps > 0 and p.step >= tc.max_steps, f"reached train.max_steps={tc.max_steps}"),
            (
                tc.max_minutes > 0 and self.budget_used() >= tc.max_minutes * 60,
                f"reached train.max_minutes={tc.max_minutes:g}",
            ),
            (
                tc.patience > 0 and p.stale_validations >= tc.patience,
                f"no better validation for train.patience={tc.patience}",
            ),
        ]
        local = next((why for hit, why in reasons if hit), None)
        return self.dist.agree(local)

    def fit(self) -> Progress:
        tc, p = self.cfg.train, self.progress
        self.log(
            f"model: {count_parameters(self.model) / 1e6:.2f}M parameters | device {self.device} | "
            f"precision {self.dtype or torch.float32} | {len(self.sampler)} batches per epoch"
            + (f" per rank ({self.dist.world_size} ranks)" if self.dist.world_size > 1 else "")
        )
        clock = time.perf_counter() - p.elapsed  # training time survives resumes
        stop: str | None = None
        while stop is None and p.epoch < tc.max_epochs:
            stop, rate = self.run_epoch(clock)
            if stop is None:
                p.epoch += 1
                p.batch_in_epoch = 0
                if not tc.validate_every_steps:
                    self.validate()
                p.elapsed = time.perf_counter() - clock
                self.log_epoch(rate)
                stop = self.should_stop()
        if self.stop_signal is not None:
            self.save_last()
            raise Interrupted(
                f"training interrupted at update {p.step} ({self.stop_signal}); last.pt saved. Resume with: "
                f"mt train --run {self.run.root} --resume"
            )
        if p.last_validated_step != p.step:
            self.validate()
        p.elapsed = time.perf_counter() - clock
        self.save_last()
        self.log(f"training stopped: {stop or f'reached train.max_epochs={tc.max_epochs}'}")
        return p

    def run_epoch(self, clock: float) -> tuple[str | None, float]:
        """Train to the end of the epoch or a stop reason; returns it and the epoch's tokens/s."""
        tc, p = self.cfg.train, self.progress
        self.begin_epoch()
        bar = self.progress_bar()
        epoch_tokens, epoch_start = 0, time.perf_counter()
        window_tokens, window_start = 0, time.perf_counter()
        try:
            for batches in self.epoch_updates():
                applied_before = p.step
                loss, grad_norm = self.update(batches)
                p.batch_in_epoch += len(batches)
                p.elapsed = time.perf_counter() - clock
                tokens = self.dist.sum(sum(b.src_tokens + b.tgt_tokens for b in batches))
                epoch_tokens, window_tokens = epoch_tokens + tokens, window_tokens + tokens
                rate = window_tokens / max(time.perf_counter() - window_start, 1e-9)
                lr = learning_rate(p.step, tc, self.cfg.model.d_model, self.budget_used())
                bar.update(len(batches))
                bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{rate:.0f}")
                if p.step > applied_before and p.step % tc.log_every_steps == 0:
                    self.metrics.write(
                        "train",
                        step=p.step,
                        epoch=p.epoch + 1,
                        loss=loss,
                        grad_norm=grad_norm,
                        lr=lr,
                        tokens_per_s=rate,
                        elapsed=p.elapsed,
                    )
                    window_tokens, window_start = 0, time.perf_counter()
                if p.step > applied_before and p.step % tc.save_every_steps == 0:
                    self.save_last()
                if (
                    p.step > applied_before
                    and tc.validate_every_steps
                    and p.step % tc.validate_every_steps == 0
                ):
                    self.validate()
                    p.elapsed = time.perf_counter() - clock
                stop = self.should_stop()
                if stop:
                    return stop, epoch_tokens / max(time.perf_counter() - epoch_start, 1e-9)
        finally:
            bar.close()
        return None, epoch_tokens / max(time.perf_counter() - epoch_start, 1e-9)

    def validate(self) -> None:
        p = self.progress
        if self.dist.is_main:
            result = self.validator.validate(self.model, p.step)
            improved = result.metric > p.best_metric
            if improved:
                p.best_metric, p.best_step = result.metric, p.step
            p.stale_validations = 0 if improved else p.stale_validations + 1
            self.metrics.write(
                "val", step=p.step, epoch=p.epoch, elapsed=p.elapsed, best=improved, **result.as_dict()
            )
            self.validator.keep(self.model, p.step, improved)
        p.last_validated_step = p.step
        self.dist.barrier()
        self.save_last()

    def log_epoch(self, rate: float) -> None:
        last = self.validator.last_result
        summary = f" | val loss {last.loss:.3f} bleu {last.bleu:.2f}" if last else ""
        self.log(
            f"epoch {self.progress.epoch} | update {self.progress.step} | {rate:.0f} tok/s"
            f" | {self.progress.elapsed / 60:.1f} min{summary}"
        )

    def progress_bar(self):
        from tqdm import tqdm

        quiet = not (self.dist.is_main and sys.stderr.isatty())
        return tqdm(
            total=len(self.sampler),
            initial=self.progress.batch_in_epoch,
            desc=f"epoch {self.progress.epoch + 1}",
            disable=quiet,
            unit="upd",
            leave=False,
            dynamic_ncols=True,
        )

    def install_signal_handlers(self) -> dict:
        def request_stop(signum: int, frame: object) -> None:
            self.stop_signal = signal.Signals(signum).name
            signal.signal(signum, previous[signum])  # a second Ctrl-C is not polite any more

        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        for s in previous:
            signal.signal(s, request_stop)
        return previous


def train(cfg: Config, run_dir: Path, resume: bool, log: Callable[[str], None] = print) -> dict:
    """``mt train``: from a validated config to a trained, scored run directory.

    Every log line also goes to ``RUN/train.log``. A run directory this call created is removed
    again if the command fails or is interrupted before the first checkpoint: nothing of value
    is in it yet, and an empty run would block the next fresh start.
    """
    run = RunDir(Path(run_dir))
    device = resolve_device(cfg.train.device)
    dist = Distributed.from_env(device)
    created = dist.is_main and not run.root.exists()
    try:
        amp_dtype(device, cfg.train.amp)  # refuse a bad precision before any work
        if run.root.exists() and not run.root.is_dir():
            raise InputError(f"run directory {run.root} is a file; give a directory for --run")
        if resume and not run.last.exists():
            raise CheckpointError(f"cannot resume: {run.last} does not exist (start without --resume)")
        if not resume and (previous := run.previous_training()):
            # A fresh start would mix its checkpoints and metrics with the old run's and replace best.pt.
            raise CheckpointError(
                f"{run.root} already holds a training run ({previous[0]}); continue it with "
                f"`mt train --run {run.root} --resume`, or train into another --run"
            )
        if dist.is_main:
            run.root.mkdir(parents=True, exist_ok=True)
            save_config(cfg, run.config)
            log = LogFile(run.log, echo=log)
        return _train_in(cfg, run, resume, dist, log)
    except BaseException:
        if created and not any(run.checkpoints.glob("*.pt")):
            shutil.rmtree(run.root, ignore_errors=True)
        raise
    finally:
        dist.close()


def _train_in(cfg: Config, run: RunDir, resume: bool, dist: Distributed, log: Callable[[str], None]) -> dict:
    torch.manual_seed(cfg.train.seed)
    data = prepare_training_data(cfg, run, dist, log)
    trainer = Trainer(cfg, run, data, dist, log if dist.is_main else (lambda message: None))
    if resume:
        trainer.resume()
    previous = trainer.install_signal_handlers()
    try:
        progress = trainer.fit()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if not dist.is_main:
        return {}
    report = trainer.validator.finish(progress)
    for name, scores in report["scores"].items():
        log(f"{report['split']} {name}: BLEU {scores['bleu']:.2f} chrF {scores['chrf']:.2f}")
    return report
