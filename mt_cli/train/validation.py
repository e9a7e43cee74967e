"""Validation during training, the kept checkpoints, and the final scoring into test.json.

Validation loss is the plain negative log-likelihood per real target token (no label
smoothing), so it reads as log-perplexity. Validation BLEU decodes greedily, the same way a
user's ``mt translate --beam 1`` would. best.pt is chosen by it (or by the loss when
``train.val_bleu`` is off), and a checkpoint average replaces best.pt only if it scores better.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from mt_cli.checkpoint import average_checkpoints, load_checkpoint, save_checkpoint
from mt_cli.config import Config, ModelCard, config_to_dict
from mt_cli.data.batch import source_ids, target_ids
from mt_cli.data.dataset import EncodedPairs
from mt_cli.data.prepare import TrainingData
from mt_cli.data.sampler import TokenBatchSampler
from mt_cli.decode.evaluate import evaluate
from mt_cli.decode.translator import Translator
from mt_cli.files import write_json
from mt_cli.layout import RunDir
from mt_cli.model.loss import token_loss
from mt_cli.model.transformer import Transformer, build_model
from mt_cli.runtime.device import amp_dtype, autocast
from mt_cli.train.progress import Progress


@dataclass(frozen=True)
class ValResult:
    loss: float
    bleu: float
    chrf: float
    metric: float  # what best.pt is chosen by: higher is better
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ppl"] = math.exp(min(self.loss, 50.0))
        return data


class Validator:
    def __init__(
        self,
        cfg: Config,
        run: RunDir,
        data: TrainingData,
        device: torch.device,
        dtype: torch.dtype | None,
        log: Callable[[str], None],
    ):
        self.cfg, self.run, self.data, self.device, self.dtype, self.log = cfg, run, data, device, dtype, log
        self.last_result: ValResult | None = None
        self.card = ModelCard.of(cfg)
        # Every val pair counts, cut to the model's positions rather than dropped.
        limit = cfg.model.max_positions
        self.val_pairs = EncodedPairs(
            [source_ids(pieces[: limit - 1]) for pieces in data.src_tok.encode(data.val_src)],
            [target_ids(pieces[: limit - 2]) for pieces in data.tgt_tok.encode(data.val_ref)],
        )
        sampler = TokenBatchSampler(*self.val_pairs.widths(), cfg.train.max_tokens, shuffle=False, seed=0)
        self.val_batches = sampler.batches()

    def translator(self, model: Transformer) -> Translator:
        return Translator(model, self.data.src_tok, self.data.tgt_tok, self.card, self.device, self.dtype)

    @torch.no_grad()
    def loss(self, model: Transformer) -> float:
        """Unsmoothed NLL per real target token over the whole val split."""
        total, tokens = 0.0, 0
        for indices in self.val_batches:
            batch = self.val_pairs.collate(indices).to(self.device)
            with autocast(self.device, self.dtype):
                logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)  # (B, T, V)
            total += token_loss(logits, batch.tgt_out).item()
            tokens += batch.tgt_tokens
        return total / max(tokens, 1)

    def validate(self, model: Transformer, step: int) -> ValResult:
        start = time.perf_counter()
        was_training = model.training
        model.eval()
        try:
            loss = self.loss(model)
            bleu = chrf = float("nan")
            if self.cfg.train.val_bleu:
                translator = self.translator(model)
                scores = evaluate(
                    lambda lines: translator.translate_lines(lines, beam_size=1),
                    self.data.val_src,
                    self.data.val_ref,
                ).scores
                bleu, chrf = scores.bleu, scores.chrf
        finally:
            model.train(was_training)
        metric = bleu if self.cfg.train.val_bleu else -loss
        self.last_result = ValResult(loss, bleu, chrf, metric, time.perf_counter() - start)
        return self.last_result

    def weights(self, model: nn.Module, step: int) -> dict[str, Any]:
        return {
            "model": model.state_dict(),
            "card": config_to_dict(self.card),
            "config": config_to_dict(self.cfg),
            "step": step,
        }

    def keep(self, model: nn.Module, step: int, improved: bool) -> None:
        """Save this validation's weights for averaging (keeping the newest K) and maybe best.pt."""
        payload = self.weights(model, step)
        save_checkpoint(payload, self.run.step_checkpoint(step))
        for old in self.run.step_checkpoints()[: -self.cfg.train.keep_last]:
            old.unlink()
        if improved:
            save_checkpoint(payload, self.run.best)

    def test_scores(self, model: Transformer) -> dict[str, Any]:
        """best.pt on the test split, greedy and with the recipe's beam, decoded as `mt eval` does.

        ``model`` is loaded and cast for inference here: pass one that nothing else will train.
        """
        model.load_state_dict(load_checkpoint(self.run.best)["model"])
        # The precision `mt eval` picks on this machine, not the training one: a run trained with
        # train.amp=off (or bf16) must score in test.json what `mt eval` of best.pt gives.
        inference_dtype = amp_dtype(self.device, "auto")
        translator = Translator.for_inference(
            model, self.data.src_tok, self.data.tgt_tok, self.card, self.device, inference_dtype
        )
        scores = {}
        for beam in sorted({1, self.cfg.decode.beam_size}):
            result = evaluate(
                lambda lines, b=beam: translator.translate_lines(lines, beam_size=b),
                self.data.test_src,
                self.data.test_ref,
            )
            scores["greedy" if beam == 1 else f"beam{beam}"] = result.as_dict()
        return scores

    def finish(self, progress: Progress) -> dict[str, Any]:
        """Average (if configured), pick the final best.pt on val, score it on the test split."""
        tc = self.cfg.train
        start = time.perf_counter()
        model = build_model(self.cfg.model, self.data.src_tok.vocab_size, self.data.tgt_tok.vocab_size).to(
            self.device
        )
        best_metric = progress.best_metric
        kept = self.run.step_checkpoints()[-tc.average_last :] if tc.average_last else []
        if len(kept) > 1:
            average = average_checkpoints(kept, self.run.average)
            model.load_state_dict(load_checkpoint(average)["model"])
            result = self.validate(model, progress.step)
            self.log(
                f"average of the last {len(kept)} checkpoints: val bleu {result.bleu:.2f} "
                f"(best single: {best_metric:.2f})"
            )
            if result.metric > best_metric:
                payload = self.weights(model, progress.step)
                payload["averaged_from"] = [p.name for p in kept]
                save_checkpoint(payload, self.run.best)
                best_metric = result.metric
        scores = self.test_scores(model) if tc.test_at_end else {}
        report = {
            "split": self.cfg.data.test_split,
            "scores": scores,
            "val_metric": best_metric,
            "best_checkpoint": str(self.run.best),
            "updates": progress.step,
            "epochs": progress.epoch,
            "training_minutes": round(progress.elapsed / 60, 2),
            "skipped_updates": progress.skipped_steps,
            "averaging_and_test_minutes": round((time.perf_counter() - start) / 60, 2),
        }
        write_json(report, self.run.test_scores)
        return report
