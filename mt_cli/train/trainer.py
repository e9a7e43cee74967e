"""The training loop: AMP, accumulation, clipping, validation, checkpoints, resume, DDP.

One update = ``accum_steps`` token-budget batches; the loss is summed over target tokens and
divided by the real (non-pad) target tokens of the whole update, across ranks, so gradients do
not depend on how the tokens were split into batches. The learning rate is a pure function of
the update number (and, with ``train.lr_horizon: max_minutes``, of the saved training seconds),
so resuming needs no scheduler state.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import replace

import torch

from mt_cli.checkpoint import Checkpoint
from mt_cli.config.recipe import config_to_dict
from mt_cli.config.sections import Config
from mt_cli.data.batch import Batch
from mt_cli.data.epochs import epoch_plan
from mt_cli.data.loader import EpochLoader
from mt_cli.data.prepare import TrainingData
from mt_cli.data.term_weights import TermWeights
from mt_cli.disk.layout import RunDir
from mt_cli.errors import CheckpointError
from mt_cli.model.flops import training_flops
from mt_cli.model.loss import symmetric_kl, token_loss
from mt_cli.model.transformer import build_model, count_parameters
from mt_cli.runtime.device import amp_dtype, autocast, inference_dtype, resolve_device
from mt_cli.runtime.distributed import Distributed
from mt_cli.runtime.flops import peak_flops
from mt_cli.runtime.precision import ComputeType, amp_compute_type
from mt_cli.specials import PAD_ID
from mt_cli.text import terms
from mt_cli.train.amp import Precision
from mt_cli.train.optim import learning_rate, make_optimizer
from mt_cli.train.outcome import Settled, UpdateOutcome
from mt_cli.train.progress import (
    MetricsLog,
    Progress,
    Throughput,
    capture_rng,
    check_world_size,
    epoch_bar,
    ranks_rng,
    restore_rng,
)
from mt_cli.train.validation import Validator
from mt_cli.train.warm_start import Parent, freeze, keep_optimizer, started_from


class Interrupted(Exception):
    """SIGINT/SIGTERM arrived; ``last.pt`` was saved. The CLI exits 130 with the message."""


class Trainer:
    def __init__(
        self, cfg: Config, run: RunDir, data: TrainingData, dist: Distributed, log: Callable[[str], None]
    ):
        self.cfg, self.run, self.data, self.dist, self.log = cfg, run, data, dist, log
        tc = cfg.train
        self.device = dist.device(resolve_device(tc.device))
        self.model = build_model(cfg.model, data.src_tok.vocab_size, data.tgt_tok.vocab_size).to(self.device)
        if cfg.data.terms is not None:  # token dropout keeps each term annotation whole
            self.model.src_token_dropout.spare(*data.src_tok.to_ids([terms.TERM, terms.END]))
        self.precision = self.choose_precision()
        freeze(self.model, tc.freeze)  # before the optimizer and DDP, which both leave frozen ones out
        self.optimizer = make_optimizer(self.model, tc)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.dtype == torch.float16)
        self.progress = Progress()
        tokenizers = (data.src_tok, data.tgt_tok)
        self.plan = epoch_plan(cfg, data.train, tokenizers, dist.rank, dist.world_size)
        self.loader = EpochLoader(self.plan, cfg.data.workers, tc.seed)
        weighs_terms = tc.term_loss_weight != 1.0
        self.term_weights = TermWeights.of(data.src_tok, tc.term_loss_weight) if weighs_terms else None
        self.data_wait = 0.0  # seconds the loop has waited for batches
        self.window = Throughput(None)  # the current log interval's throughput (set up by fit)
        # A trial's validation computes as `mt eval` does, not in a precision chosen by a timing.
        validation_dtype = (
            inference_dtype(self.device, ComputeType.DEFAULT) if self.precision.deciding else self.dtype
        )
        self.validator = Validator(cfg, run, data, self.device, validation_dtype, log)
        board = run.tensorboard if tc.tensorboard else None
        self.metrics = MetricsLog(run.metrics, enabled=dist.is_main, tensorboard=board)
        self.stop_signal: str | None = None
        self.pending: UpdateOutcome | None = None  # the last update's outcome, still on the device
        # Where reading an outcome waits for the device, it is read one update late (``outcome``).
        self.lag_reads = self.device.type == "cuda"
        self.peak_flops, self.peak_source = peak_flops(self.device, self.dtype)  # this device's, for MFU
        self.ddp = dist.wrap(self.model)  # the model itself when not distributed
        self.forward = torch.compile(self.ddp) if tc.compile else self.ddp

    def choose_precision(self) -> Precision:
        """``train.amp``'s dtype; ``auto`` on a CPU with native bf16 is a trial (``amp``)."""
        tc = self.cfg.train
        dtype = amp_dtype(self.device, tc.amp)
        auto = amp_compute_type(tc.amp) is ComputeType.DEFAULT
        trial = auto and dtype is not None and self.device.type == "cpu"
        return Precision(dtype, trial, self.dist, self.log)

    @property
    def dtype(self) -> torch.dtype | None:
        """The training precision (while a trial runs, the candidate it may keep)."""
        return self.precision.dtype

    def describe_precision(self) -> str:
        if self.precision.deciding:
            return "bf16 or fp32 (train.amp auto: timed on the first updates)"
        return str(self.dtype or torch.float32)

    # ---- checkpoints -------------------------------------------------------------------
    def save_last(self) -> None:
        """Rank 0 writes last.pt; every rank calls it, since it gathers every rank's random state."""
        self.settle()
        rng = self.dist.gather(capture_rng())
        if rng is None:
            return
        self.progress.world_size = self.dist.world_size
        Checkpoint(
            model=self.model.state_dict(),
            card=self.validator.card,
            config=config_to_dict(self.cfg),
            step=self.progress.step,
            optimizer=self.optimizer.state_dict(),
            scaler=self.scaler.state_dict(),
            progress=self.progress.as_dict(),
            rng=ranks_rng(rng),
        ).save(self.run.last)

    def resume(self) -> None:
        # On the CPU: the RNG states must stay CPU ByteTensors, and load_state_dict moves weights and
        # optimizer moments to the model's device itself.
        saved = Checkpoint.load(self.run.last)
        optimizer, scaler, progress, rng = saved.training_state(self.run.last)
        self.progress = Progress.from_dict(progress)
        check_world_size(self.progress.world_size, self.dist.world_size, self.run.last)
        self.model.load_state_dict(saved.model)
        self.optimizer.load_state_dict(optimizer)
        self.scaler.load_state_dict(scaler)
        restore_rng(rng, self.dist.rank)
        # A resumed warm start needs no parent: its card names it already.
        self.validator.card = replace(self.validator.card, parent=saved.card.parent)
        self.log(
            f"resumed from {self.run.last} at update {self.progress.step}, epoch {self.progress.epoch + 1}"
        )

    def start_from(self, parent: Parent) -> None:
        """Begin from the parent's weights (and what ``train.init_keep`` names), name the parent in
        the card, and score them at update 0 (a validation like any other: metrics.jsonl, best.pt)."""
        tc = self.cfg.train
        try:
            self.model.load_state_dict(parent.weights)
        except RuntimeError as err:
            raise CheckpointError(
                f"train.init_from: {parent.checkpoint} does not fit this model ({str(err).splitlines()[0]})"
            ) from None
        if "optimizer" in tc.init_keep:
            keep_optimizer(self.optimizer, parent)
        if "schedule" in tc.init_keep:
            self.progress.schedule_offset = parent.step
        self.validator.card = replace(self.validator.card, parent=parent.record)
        self.log(started_from(parent, tc, self.model))
        self.validate()

    # ---- one update ----------------------------------------------------------------------
    def update(self, batches: list[Batch]) -> None:
        """Queue one optimizer update over ``accum_steps`` batches. Its outcome (loss, gradient
        norm, applied or skipped) stays on the device as ``self.pending`` until ``settle`` reads it."""
        tc = self.cfg.train
        if self.term_weights is not None:
            batches = [self.term_weights(batch) for batch in batches]
        on_device = [batch.padded(tc.pad_to_multiple).to(self.device) for batch in batches]
        local_tokens = sum(b.tgt_tokens for b in batches)  # real target tokens, this rank
        tokens = self.update_tokens(on_device, local_tokens)  # and all ranks
        losses = []
        for i, b in enumerate(on_device):
            with nullcontext() if i == len(on_device) - 1 else self.dist.no_sync(self.ddp):
                with autocast(self.device, self.precision.current()):
                    loss, regulariser = self.batch_loss(b)  # summed over tokens
                # DDP averages gradients over ranks; scale so the result is a per-token mean.
                self.scaler.scale((loss + regulariser) * self.dist.world_size / tokens).backward()
            losses.append(loss.detach())
        # The previous update's outcome, read now that this one's kernels are queued behind it:
        # the learning rate below depends on whether it was applied.
        self.settle()
        self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), tc.clip_norm or math.inf)
        update = self.progress.step + 1 + self.progress.schedule_offset
        lr = learning_rate(update, tc, self.cfg.model.d_model, self.budget_used())
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.step_optimizer(grad_norm)
        self.optimizer.zero_grad(set_to_none=True)
        self.pending = UpdateOutcome(losses, grad_norm, local_tokens)

    def batch_loss(self, b: Batch) -> tuple[torch.Tensor, torch.Tensor | float]:
        """One batch's token loss (summed), and what ``train.rdrop`` adds to it: with R-Drop the
        batch passes twice in one forward (each row's dropout is its own), the loss is the two
        passes' mean and the addition their symmetric KL divergence times the weight."""
        tc = self.cfg.train
        if not tc.rdrop:
            logits = self.forward(b.src, b.tgt_in, b.src_mask, b.tgt_mask)  # (B, T, V)
            return token_loss(logits, b.tgt_out, tc.label_smoothing, b.tgt_weight), 0.0
        twice = [torch.cat([x, x]) for x in (b.src, b.tgt_in, b.src_mask, b.tgt_mask)]
        first, second = self.forward(*twice).chunk(2)  # (B, T, V) each
        loss = (
            token_loss(first, b.tgt_out, tc.label_smoothing, b.tgt_weight)
            + token_loss(second, b.tgt_out, tc.label_smoothing, b.tgt_weight)
        ) / 2
        return loss, tc.rdrop * symmetric_kl(first, second, b.tgt_out)

    def update_tokens(self, batches: list[Batch], local: int) -> int | torch.Tensor:
        """The real target tokens of an update on all ranks (``local`` on this one): the loss's
        divisor. Under DDP counted and summed on the device (a tensor), so that no rank waits for
        the sum, nor for a copy of ``local`` to the device, before queueing its passes."""
        if not self.dist.active:
            return local
        counted = torch.stack([b.tgt_out.ne(PAD_ID).sum() for b in batches]).sum()  # (,) long
        return self.dist.all_reduce_sum(counted)

    def step_optimizer(self, grad_norm: torch.Tensor) -> None:
        """Apply the update unless the gradient is not finite, decided on the device: fused AdamW
        skips itself when its ``found_inf`` is 1, as the fp16 scaler arranges with its own flag."""
        if self.scaler.is_enabled():
            self.scaler.step(self.optimizer)
            self.scaler.update()
            return
        self.optimizer.found_inf = grad_norm.isfinite().logical_not().float()
        self.optimizer.step()
        del self.optimizer.found_inf

    def settle(self) -> Settled | None:
        """Read the queued update's outcome (waiting for it if need be) and count it; returns it."""
        if self.pending is None:
            return None
        settled, self.pending = self.pending.read(), None
        self.progress.count_update(settled.applied, self.cfg.train.max_bad_steps)
        return settled

    def decided_by(self, step: int) -> bool:
        """Whether reaching update ``step`` decides something the host must know at once (a log
        line, a checkpoint, a validation, the end, the precision trial): then the update that may
        reach it is settled right away, not after the next one is queued."""
        tc = self.cfg.train
        every = (tc.log_every_steps, tc.save_every_steps, tc.validate_every_steps)
        return (
            self.precision.deciding
            or any(n and step % n == 0 for n in every)
            or (tc.max_steps > 0 and step >= tc.max_steps)
        )

    # ---- the loop --------------------------------------------------------------------------
    def epoch_updates(self) -> Iterator[list[Batch]]:
        """The remaining updates of the current epoch, from the saved position in it. The seconds
        spent waiting for batches add up in ``self.data_wait`` (a loader falling behind shows there)."""
        group: list[Batch] = []
        batches = self.loader.batches(self.progress.epoch, self.progress.batch_in_epoch)
        while True:
            asked = time.perf_counter()
            batch = next(batches, None)
            self.data_wait += time.perf_counter() - asked
            if batch is None:
                break
            group.append(batch)
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
        # None: BPE-dropout segments anew, or a fractional corpus weight draws other pairs, each epoch.
        per_epoch = self.plan.length()
        self.log(
            f"model: {count_parameters(self.model) / 1e6:.2f}M parameters | device {self.device} | "
            f"precision {self.describe_precision()} | "
            + (f"{per_epoch} batches per epoch" if per_epoch else "batches per epoch vary")
            + (f" per rank ({self.dist.world_size} ranks)" if self.dist.world_size > 1 else "")
        )
        peak = f"{self.peak_flops / 1e12:.2f} TFLOP/s" if self.peak_flops else "unknown"
        self.log(f"MFU is model FLOPs per second over this device's peak: {peak} ({self.peak_source})")
        clock = time.perf_counter() - p.elapsed  # training time survives resumes
        # The log interval runs across epoch ends, so a wait for the next epoch's batches shows in it.
        self.window = Throughput(self.peak_flops, self.data_wait)
        stop: str | None = None
        while stop is None and p.epoch < tc.max_epochs:
            stop, meter = self.run_epoch(clock)
            if stop is None:
                p.epoch += 1
                p.batch_in_epoch = 0
                if not tc.validate_every_steps:
                    self.validate()
                p.elapsed = time.perf_counter() - clock
                self.log_epoch(meter)
                stop = self.should_stop()
        self.settle()  # an update queued when a clock or a signal stopped the loop
        # Every rank saves (save_last gathers) and stops when any rank was signalled, even one
        # whose own signal has not arrived yet.
        interrupted = self.dist.agree(self.stop_signal)
        if interrupted is not None:
            self.save_last()
            raise Interrupted(
                f"training interrupted at update {p.step} ({interrupted}); last.pt saved. Resume with: "
                f"mt train --run {self.run.root} --resume"
            )
        if p.last_validated_step != p.step:
            self.validate()
        p.elapsed = time.perf_counter() - clock
        self.save_last()
        self.log(f"training stopped: {stop or f'reached train.max_epochs={tc.max_epochs}'}")
        return p

    def run_epoch(self, clock: float) -> tuple[str | None, Throughput]:
        """Train to the end of the epoch or a stop reason; returns it and the epoch's throughput.

        On CUDA an update's outcome is read after the next update is queued (``settle``), except
        where its step decides something (``decided_by``); on the CPU at once. Both count the
        same updates the same way."""
        p = self.progress
        quiet = not (self.dist.is_main and sys.stderr.isatty())
        bar = epoch_bar(self.plan.length(), self.progress, quiet)
        epoch, window = Throughput(self.peak_flops, self.data_wait), self.window
        try:
            for batches in self.epoch_updates():
                started = time.perf_counter()
                self.update(batches)  # settles the update before it
                reached = p.step + 1  # if this update is applied
                settled = self.settle() if not self.lag_reads or self.decided_by(reached) else None
                seconds = time.perf_counter() - started
                p.batch_in_epoch += len(batches)
                p.elapsed = time.perf_counter() - clock
                tokens = sum(b.src_tokens + b.tgt_tokens for b in batches)  # this rank's
                if self.precision.deciding and self.precision.record(seconds, self.dist.sum(tokens)):
                    self.peak_flops, self.peak_source = peak_flops(self.device, self.dtype)
                flops = sum(self.flops(b) for b in batches)
                epoch.add(tokens, flops)
                window.add(tokens, flops)
                bar.update(len(batches))
                if settled is not None and settled.applied:
                    window = self.step_reached(settled, window, bar, clock)
                stop = self.should_stop()
                if stop:
                    return stop, epoch
        finally:
            bar.close()
        return None, epoch

    def step_reached(self, settled: Settled, window: Throughput, bar, clock: float) -> Throughput:
        """What update ``progress.step`` (just applied, ``settled``) calls for: a log line, a
        checkpoint, a validation. Returns the log interval's throughput (a new one after a log line)."""
        tc, p = self.cfg.train, self.progress
        if p.step % tc.log_every_steps == 0:
            lr = learning_rate(p.step + p.schedule_offset, tc, self.cfg.model.d_model, self.budget_used())
            rates = window.summed(self.dist.sum).as_dict(self.data_wait)
            bar.set_postfix(loss=f"{settled.loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{rates['tokens_per_s']:.0f}")
            self.metrics.write(
                "train",
                step=p.step,
                epoch=p.epoch + 1,
                loss=settled.loss,
                grad_norm=settled.grad_norm,
                lr=lr,
                **rates,
                elapsed=p.elapsed,
            )
            window = self.window = Throughput(self.peak_flops, self.data_wait)
        if p.step % tc.save_every_steps == 0:
            self.save_last()
        if tc.validate_every_steps and p.step % tc.validate_every_steps == 0:
            self.validate()
            p.elapsed = time.perf_counter() - clock
        return window

    def flops(self, batch: Batch) -> float:
        """Model FLOPs of training on ``batch`` (``model.flops``); R-Drop passes it twice."""
        passes = 2 if self.cfg.train.rdrop else 1
        return passes * training_flops(
            self.cfg.model, self.data.tgt_tok.vocab_size, *batch.sentence_lengths()
        )

    def validate(self) -> None:
        self.settle()
        started, p = time.perf_counter(), self.progress
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
        self.window.exclude(time.perf_counter() - started)  # training rates leave validation out

    def log_epoch(self, meter: Throughput) -> None:
        rates = meter.summed(self.dist.sum)  # a collective: every rank gets here
        last = self.validator.last_result
        summary = f" | val loss {last.loss:.3f} bleu {last.bleu:.2f}" if last else ""
        for name, scores in list(last.directions.items())[1:] if last else []:  # the first is above
            summary += f" | {name} loss {scores['loss']:.3f} bleu {scores['bleu']:.2f}"
        self.log(
            f"epoch {self.progress.epoch} | update {self.progress.step} | {rates.describe()}"
            f" | {self.progress.elapsed / 60:.1f} min{summary}"
        )
