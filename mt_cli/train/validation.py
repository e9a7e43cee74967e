"""Validation during training, the kept checkpoints, and the final scoring into test.json.

Validation loss is the plain negative log-likelihood per real target token (no label
smoothing), so it reads as log-perplexity. Validation BLEU decodes greedily, the same way a
user's ``mt translate --beam 1`` would. best.pt is chosen by it (or by the loss when
``train.val_bleu`` is off), and a checkpoint average replaces best.pt only if it scores better.

A run whose corpora translate several directions (``data.corpora``) is validated and tested in
each of them that has val and test text (``data.prepare.load_more_directions``), with that
direction's target tag; the run's own direction (the first) alone chooses best.pt, and its
scores keep the keys of a one-direction run, the others going under ``directions``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from mt_cli.checkpoint import Checkpoint, average_checkpoints
from mt_cli.config.card import ModelCard
from mt_cli.config.options import TranslateOptions
from mt_cli.config.recipe import config_to_dict
from mt_cli.config.sections import Config
from mt_cli.data.batch import source_ids, target_ids
from mt_cli.data.dataset import EncodedPairs
from mt_cli.data.prepare import EvalSet, TrainingData
from mt_cli.data.sampler import TokenBatchSampler
from mt_cli.decode.evaluate import evaluate
from mt_cli.decode.translator import Translator
from mt_cli.disk.files import write_json
from mt_cli.disk.layout import RunDir
from mt_cli.model.loss import token_loss
from mt_cli.model.transformer import Transformer, build_model
from mt_cli.runtime.device import autocast, inference_dtype
from mt_cli.runtime.precision import ComputeType
from mt_cli.text.tags import translation_prefix
from mt_cli.train.progress import Progress


@dataclass(frozen=True)
class ValResult:
    loss: float
    bleu: float
    chrf: float
    metric: float  # what best.pt is chosen by: higher is better
    seconds: float
    # Of a run with several directions: each one's loss, bleu and chrf by name ("fr-en"), the first too.
    directions: dict[str, dict[str, float]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ppl"] = math.exp(min(self.loss, 50.0))
        if not self.directions:
            del data["directions"]  # a one-direction run's record is what it always was
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
        self.val_sets = [self._encoded(d) for d in data.evaluation]
        self.val_pairs, self.val_batches = self.val_sets[0]  # the run's own direction's

    def _encoded(self, direction: EvalSet) -> tuple[EncodedPairs, list[list[int]]]:
        """A direction's val pairs as the model reads them (the sources after their target tag, as
        the engine puts it) and their batches. Every val pair counts, cut to the model's positions
        rather than dropped."""
        limit, data = self.cfg.model.max_positions, self.data
        prefix = translation_prefix(self.cfg.data, direction.tgt_lang)
        pairs = EncodedPairs(
            [
                source_ids(p[: limit - 1])
                for p in data.src_tok.encode([prefix + s for s in direction.val_src])
            ],
            [target_ids(p[: limit - 2]) for p in data.tgt_tok.encode(direction.val_ref)],
        )
        sampler = TokenBatchSampler(*pairs.widths(), self.cfg.train.max_tokens, shuffle=False, seed=0)
        return pairs, sampler.batches()

    def translator(self, model: Transformer) -> Translator:
        # In this process: worker processes would keep the weights of the fork, not the training's.
        return Translator(
            model, self.data.src_tok, self.data.tgt_tok, self.card, self.device, self.dtype, processes=1
        )

    @torch.no_grad()
    def loss(self, model: Transformer, direction: int = 0) -> float:
        """Unsmoothed NLL per real target token over the whole val split of a direction.

        Summed on the device in float64 (what adding the batches' fp32 sums as Python floats
        gives), and read once: a read per batch would make the host wait for each."""
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        tokens = 0
        val_pairs, val_batches = self.val_sets[direction]
        for indices in val_batches:
            batch = val_pairs.collate(indices).to(self.device)
            with autocast(self.device, self.dtype):
                logits = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)  # (B, T, V)
            total += token_loss(logits, batch.tgt_out).double()
            tokens += batch.tgt_tokens
        return total.item() / max(tokens, 1)

    def validate(self, model: Transformer, step: int) -> ValResult:
        start = time.perf_counter()
        was_training = model.training
        model.eval()
        try:
            found = [self._direction(model, index) for index in range(len(self.data.evaluation))]
        finally:
            model.train(was_training)
        loss, bleu, chrf = found[0]
        metric = bleu if self.cfg.train.val_bleu else -loss
        names = [d.name for d in self.data.evaluation] if len(found) > 1 else []
        keys = ("loss", "bleu", "chrf")
        directions = {
            name: {key: round(value, 6) for key, value in zip(keys, scores)}
            for name, scores in zip(names, found)
        }
        self.last_result = ValResult(loss, bleu, chrf, metric, time.perf_counter() - start, directions)
        return self.last_result

    def _direction(self, model: Transformer, index: int) -> tuple[float, float, float]:
        """(loss, BLEU, chrF) of one direction's val split; BLEU and chrF NaN without val_bleu."""
        loss = self.loss(model, index)
        if not self.cfg.train.val_bleu:
            return loss, float("nan"), float("nan")
        translator, direction = self.translator(model), self.data.evaluation[index]
        scores = evaluate(
            lambda lines: translator.translate_lines(
                lines, TranslateOptions(beam=1, tgt_lang=direction.tgt_lang)
            ),
            direction.val_src,
            direction.val_ref,
        ).scores
        return loss, scores.bleu, scores.chrf

    def weights(self, model: nn.Module, step: int) -> Checkpoint:
        return Checkpoint(model.state_dict(), self.card, config_to_dict(self.cfg), step)

    def keep(self, model: nn.Module, step: int, improved: bool) -> None:
        """Save this validation's weights for averaging (keeping the newest K) and maybe best.pt."""
        payload = self.weights(model, step)
        payload.save(self.run.step_checkpoint(step))
        for old in self.run.step_checkpoints()[: -self.cfg.train.keep_last]:
            old.unlink()
        if improved:
            payload.save(self.run.best)

    def test_scores(self, model: Transformer) -> dict[str, Any]:
        """best.pt on the test split of each direction ("de-en": its scores), greedy and with the
        recipe's beam, decoded as `mt eval` does.

        ``model`` is loaded and cast for inference here: pass one that nothing else will train.
        """
        model.load_state_dict(Checkpoint.load(self.run.best).model)
        # The precision `mt eval` picks on this machine, not the training one: a run trained with
        # train.amp=off (or bf16) must score in test.json what `mt eval` of best.pt gives.
        dtype = inference_dtype(self.device, ComputeType.DEFAULT)
        translator = Translator.for_inference(
            model, self.data.src_tok, self.data.tgt_tok, self.card, self.device, dtype
        )
        found = {}
        for direction in self.data.evaluation:
            scores = {}
            for beam in sorted({1, self.cfg.decode.beam_size}):
                result = evaluate(
                    lambda lines, b=beam, d=direction: translator.translate_lines(
                        lines, TranslateOptions(beam=b, tgt_lang=d.tgt_lang)
                    ),
                    direction.test_src,
                    direction.test_ref,
                )
                scores["greedy" if beam == 1 else f"beam{beam}"] = result.as_dict()
            found[direction.name] = scores
        return found

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
            model.load_state_dict(Checkpoint.load(average).model)
            result = self.validate(model, progress.step)
            self.log(
                f"average of the last {len(kept)} checkpoints: val bleu {result.bleu:.2f} "
                f"(best single: {best_metric:.2f})"
            )
            if result.metric > best_metric:
                payload = self.weights(model, progress.step)
                payload.averaged_from = [p.name for p in kept]
                payload.save(self.run.best)
                best_metric = result.metric
        directions = self.test_scores(model) if tc.test_at_end else {}
        first = self.data.first.name
        report = {
            "split": self.cfg.data.test_split,
            "scores": directions.get(first, {}),  # the run's own direction
            "val_metric": best_metric,
            "best_checkpoint": str(self.run.best),
            "updates": progress.step,
            "epochs": progress.epoch,
            "training_minutes": round(progress.elapsed / 60, 2),
            "skipped_updates": progress.skipped_steps,
            "averaging_and_test_minutes": round((time.perf_counter() - start) / 60, 2),
        }
        if len(self.data.evaluation) > 1:
            report["directions"] = directions  # every direction's, the run's own first
        write_json(report, self.run.test_scores)
        return report
