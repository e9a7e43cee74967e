"""``mt bench``: our Transformer against the textbook ``nn.Transformer``, on this machine.

One process, identical real Multi30k batches, identical weights: the textbook model
(``textbook.TextbookTransformer``) is given a copy of ours, so both compute the same function.

Training rows: real source+target tokens per second for forward, backward, gradient clipping and
one AdamW step (``make_optimizer``, ``token_loss``), over the first ``batches`` token-budget
batches of the training split (epoch 0's shuffled order), in fp32 and in the machine's AMP mode.
The batches are on the device before the clock starts; every row has its own copy of the weights
and its own optimizer, and one untimed warm-up step on its largest batch. MFU: the model FLOPs of
those batches (``model.flops``) per second over the device's peak in that precision
(``runtime.flops``: a datasheet on known GPUs, a measured matmul peak on CPUs).

Translation rows: sentences/s and generated tokens/s (EOS included) on the first N test2016
sentences, in the translator's precision (weights cast to it once, autocast on, as in
``mt translate``): our greedy and beam search with the KV cache, batched
as ``Translator`` batches (sorted by length, token budget), against the tutorial loop
(``naive_greedy_batch``: batches of 128 in input order, the whole decoder re-run on the prefix at
every step) on the textbook model. Without ``--run`` the weights are random: such a model rarely
emits EOS, so outputs mostly run to the length limit, a worst case for decoding.

Timing, memory and the printed table: ``tools.timing``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import platform
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mt_cli.config.card import ModelCard
from mt_cli.config.recipe import load_config
from mt_cli.config.sections import Config
from mt_cli.data.batch import Batch, pad_sources
from mt_cli.data.corpus import load_corpus
from mt_cli.data.dataset import EncodedPairs, encode_pairs, short_enough
from mt_cli.data.sampler import TokenBatchSampler
from mt_cli.decode.hypotheses import max_output_lengths
from mt_cli.decode.search import ModelSearches
from mt_cli.decode.translator import Translator
from mt_cli.disk.layout import RunDir
from mt_cli.model.flops import training_flops
from mt_cli.model.loss import token_loss
from mt_cli.model.packed import pack_for_cpu_inference
from mt_cli.model.transformer import build_model, count_parameters
from mt_cli.runtime.device import autocast, inference_dtype, resolve_device
from mt_cli.runtime.flops import peak_flops
from mt_cli.runtime.precision import ComputeType
from mt_cli.text.tokenizer import prepare_tokenizers
from mt_cli.tools.textbook import naive_greedy_batch, textbook_from
from mt_cli.tools.timing import Row, measure_peaks, time_rows
from mt_cli.train.optim import make_optimizer
from mt_cli.trained import load_trained

NAIVE_BATCH = 128
TEST_SPLIT = "test2016"


def _precision(dtype: torch.dtype | None) -> str:
    return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]


def _load(
    config: str | Path,
    overrides: list[str],
    run: Path | None,
    checkpoint: str | None,
    device: str,
    workdir: Path,
    log: Callable[[str], None],
) -> tuple[Translator, Config, str]:
    """The model to measure (as a Translator), the recipe it trains with, and a description of its weights."""
    if run is not None:
        # fp32 weights under autocast, as in training, so that the training rows train fp32
        # parameters and both implementations decode the same way (`mt translate` goes one
        # step further and casts the weights to bf16 once).
        tr = Translator.of(load_trained(run, checkpoint), device, ComputeType.FLOAT32)
        tr = dataclasses.replace(tr, dtype=inference_dtype(tr.device, ComputeType.DEFAULT))
        return (
            tr,
            load_config(RunDir(run).config, overrides),
            f"trained ({RunDir(run).find_checkpoint(checkpoint)})",
        )
    cfg = load_config(config, overrides)
    train = load_corpus(cfg.data, ["train"])["train"]
    log(f"training throwaway tokenizers on {len(train):,} pairs (no --run)")
    src_tok, tgt_tok = prepare_tokenizers(cfg, workdir, train["src"], train["tgt"], log=lambda message: None)
    torch.manual_seed(cfg.train.seed)
    target = resolve_device(device)
    model = build_model(cfg.model, src_tok.vocab_size, tgt_tok.vocab_size).to(target).eval()
    weights = "random init (no --run): outputs mostly run to the length limit, a worst case for decoding"
    card = ModelCard.of(cfg)
    dtype = inference_dtype(target, ComputeType.DEFAULT)
    return Translator(model, src_tok, tgt_tok, card, target, dtype), cfg, weights


def _train_batches(tr: Translator, cfg: Config, n: int) -> list[Batch]:
    """The first ``n`` batches of epoch 0, as `mt train` would draw them, on the device."""
    train = load_corpus(cfg.data, ["train"])["train"].to_dict()
    encoded = encode_pairs(train["src"], train["tgt"], tr.src_tok, tr.tgt_tok)
    kept = short_enough(encoded, cfg.data.max_len)
    pairs = EncodedPairs([encoded.src[i] for i in kept], [encoded.tgt[i] for i in kept])
    sampler = TokenBatchSampler(*pairs.widths(), cfg.train.max_tokens, shuffle=True, seed=cfg.train.seed)
    return [pairs.collate(indices).to(tr.device) for indices in sampler.batches()[:n]]


def _train_row(
    tr: Translator,
    cfg: Config,
    batches: list[Batch],
    impl: str,
    dtype: torch.dtype | None,
    peak: tuple[float | None, str],
) -> Row:
    tc, device = cfg.train, tr.device
    ours = copy.deepcopy(tr.model).train()
    model = ours if impl == "ours" else textbook_from(ours, cfg.model).train()
    optimizer = make_optimizer(model, tc)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)

    def step(b: Batch) -> None:
        with autocast(device, dtype):
            logits = (
                model(b.src, b.tgt_in, b.src_mask, b.tgt_mask) if impl == "ours" else model(b.src, b.tgt_in)
            )
            loss = token_loss(logits, b.tgt_out, tc.label_smoothing)
        scaler.scale(loss / b.tgt_tokens).backward()
        scaler.unscale_(optimizer)
        if tc.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc.clip_norm)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    def run() -> int:
        for b in batches:
            step(b)
        return sum(b.src_tokens + b.tgt_tokens for b in batches)

    largest = max(batches, key=lambda b: b.src.numel() + b.tgt_in.numel())
    name = "ours" if impl == "ours" else "nn.Transformer"
    flops = sum(training_flops(cfg.model, tr.tgt_tok.vocab_size, *b.sentence_lengths()) for b in batches)
    return Row("train", name, _precision(dtype), run, lambda: step(largest), flops=flops, peak_flops=peak[0])


def _decode(tr: Translator, search: Callable, batches: list, outputs: dict[int, list[int]]) -> int:
    """Run ``search(src, src_mask) -> ids per sentence`` over padded batches; returns generated tokens."""
    tokens = 0
    with autocast(tr.device, tr.dtype):
        for group, src, src_mask in batches:
            found = search(src, src_mask)
            outputs.update(zip(group, found))
            tokens += sum(len(ids) + 1 for ids in found)  # EOS included
    return tokens


def _translate_rows(tr: Translator, lines: list[str], beam: int) -> list[Row]:
    dec = tr.card.decode
    sources = tr.encode_sources(lines, warn=lambda message: None)
    model = copy.deepcopy(tr.model)
    textbook = textbook_from(model, tr.card.model).eval()
    if tr.dtype is not None:
        # As `mt translate` does, for both: weights cast once, not re-cast by autocast every step.
        model.to(dtype=tr.dtype)
        textbook.to(dtype=tr.dtype)
    if tr.device.type == "cpu":
        pack_for_cpu_inference(model, tr.dtype or torch.float32)  # as `mt translate` does: ours only
    in_order = [
        list(range(i, min(i + NAIVE_BATCH, len(sources)))) for i in range(0, len(sources), NAIVE_BATCH)
    ]

    def searches(src: torch.Tensor, mask: torch.Tensor) -> ModelSearches:
        """mt's searches over one batch, as ``Translator`` runs them."""
        return ModelSearches(model, src, mask, dec.max_len_a, dec.max_len_b)

    implementations = {
        "ours greedy": (
            tr.batches(sources, 1),
            lambda src, mask: [
                h[0].tokens for h in searches(src, mask).greedy(dec.length_penalty, scored=False)
            ],
        ),
        f"ours beam{beam}": (
            tr.batches(sources, beam),
            lambda src, mask: [h[0].tokens for h in searches(src, mask).beam(beam, 1, dec.length_penalty)],
        ),
        "nn.Transformer naive greedy": (
            in_order,
            lambda src, mask: naive_greedy_batch(
                textbook, src, max_output_lengths(model, mask, dec.max_len_a, dec.max_len_b)
            ),
        ),
    }
    rows = []
    for impl, (groups, search) in implementations.items():
        batches = [(g, *(t.to(tr.device) for t in pad_sources([sources[i] for i in g]))) for g in groups]
        largest = max(batches, key=lambda b: b[1].numel())
        outputs: dict[int, list[int]] = {}
        rows.append(
            Row(
                "translate",
                impl,
                _precision(tr.dtype),
                functools.partial(_decode, tr, search, batches, outputs),
                functools.partial(_decode, tr, search, [largest], {}),
                len(lines),
                outputs=outputs,
            )
        )
    return rows


@dataclass(frozen=True)
class BenchPlan:
    sentences: int | None  # the first N test2016 sentences; None: all
    repeats: int  # timed repeats of the training batches
    decode_repeats: int  # timed repeats of the translation pass
    batches: int  # training batches per repeat
    beam: int  # beam size of the beam-search row


def run_bench(
    config: str | Path,
    overrides: list[str],
    run: Path | None,
    checkpoint: str | None,
    device: str,
    plan: BenchPlan,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Measure everything; returns the report that ``format_report`` prints and --json writes."""
    import datasets

    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="mt-bench-") as workdir:
        tr, cfg, weights = _load(config, overrides, run, checkpoint, device, Path(workdir), log)
    lines = list(load_corpus(cfg.data, [TEST_SPLIT])[TEST_SPLIT]["src"])[: plan.sentences]
    train_batches = _train_batches(tr, cfg, plan.batches)
    amp = inference_dtype(tr.device, ComputeType.DEFAULT)  # what autocast trains in on auto
    peaks = {p: peak_flops(tr.device, p) for p in dict.fromkeys([None, amp])}
    train_rows = [
        _train_row(tr, cfg, train_batches, impl, p, peaks[p]) for p in peaks for impl in ("ours", "textbook")
    ]
    translate_rows = _translate_rows(tr, lines, plan.beam)
    log(f"training: {len(train_rows)} rows x {plan.repeats} repeats of {len(train_batches)} batches")
    time_rows(train_rows, plan.repeats, tr.device, log)
    log(f"translation: {len(translate_rows)} rows x {plan.decode_repeats} repeats of {len(lines)} sentences")
    time_rows(translate_rows, plan.decode_repeats, tr.device, log)
    measure_peaks(train_rows + translate_rows, tr.device)
    greedy, _, naive = translate_rows
    same = sum(greedy.outputs.get(i, []) == ids for i, ids in naive.outputs.items())
    return {
        **_setup(tr, cfg, weights),
        "train_batches": len(train_batches),
        **dataclasses.asdict(plan),
        "sentences": len(lines),
        "naive_matches_greedy": same / max(len(lines), 1),
        "rows": [row.as_dict() for row in train_rows + translate_rows],
        "peaks": {_precision(p): ((flops or 0) / 1e12, source) for p, (flops, source) in peaks.items()},
        "ratios": _ratios(train_rows, translate_rows, amp, plan.beam),
    }


def _setup(tr: Translator, cfg: Config, weights: str) -> dict[str, Any]:
    """The machine and the model a report was measured on."""
    if tr.device.type == "cuda":
        where = torch.cuda.get_device_name(tr.device)
    else:
        where = f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"
    m = cfg.model
    return {
        "device": f"{tr.device} ({where})",
        "torch": torch.__version__,
        "model": {
            "d_model": m.d_model,
            "encoder_layers": m.encoder_layers,
            "decoder_layers": m.decoder_layers,
            "parameters": count_parameters(tr.model),
            "src_vocab": tr.src_tok.vocab_size,
            "tgt_vocab": tr.tgt_tok.vocab_size,
        },
        "weights": weights,
    }


def _ratios(
    train_rows: list[Row], translate_rows: list[Row], amp: torch.dtype | None, beam: int
) -> dict[str, float]:
    """Side-by-side ratios of medians: ours against the textbook, AMP against fp32, beam against greedy."""
    train = [row.as_dict() for row in train_rows]
    greedy, beamed, naive = (row.as_dict() for row in translate_rows)
    ratios = {
        f"train {ours['precision']}: ours / nn.Transformer tokens/s": ours["tokens_per_s"]
        / theirs["tokens_per_s"]
        for ours, theirs in zip(train[0::2], train[1::2])
    }
    if amp is not None:
        ratios[f"train ours: {_precision(amp)} / fp32 tokens/s"] = (
            train[2]["tokens_per_s"] / train[0]["tokens_per_s"]
        )
    ratios["greedy: naive nn.Transformer / ours time"] = naive["median_s"] / greedy["median_s"]
    ratios[f"beam{beam} / greedy time (ours)"] = beamed["median_s"] / greedy["median_s"]
    return ratios
