"""``mt bench``: our Transformer against the textbook ``nn.Transformer``, on this machine.

One process, identical real Multi30k batches, identical weights: the textbook model
(``textbook.TextbookTransformer``) is given a copy of ours, so both compute the same function.

Training rows: real source+target tokens per second for forward, backward, gradient clipping and
one AdamW step (``make_optimizer``, ``token_loss``), over the first ``batches`` token-budget
batches of the training split (epoch 0's shuffled order), in fp32 and in the machine's AMP mode.
The batches are on the device before the clock starts; every row has its own copy of the weights
and its own optimizer, and one untimed warm-up step on its largest batch.

Translation rows: sentences/s and generated tokens/s (EOS included) on the first N test2016
sentences, in the translator's precision (weights cast to it once, autocast on, as in
``mt translate``): our greedy and beam search with the KV cache, batched
as ``Translator`` batches (sorted by length, token budget), against the tutorial loop
(``naive_greedy_batch``: batches of 128 in input order, the whole decoder re-run on the prefix at
every step) on the textbook model. Without ``--run`` the weights are random: such a model rarely
emits EOS, so outputs mostly run to the length limit, a worst case for decoding.

Timed repeats are interleaved, in alternating order (A B C, C B A, ...), so that slow drifts of
the machine hit every row alike; the table shows medians and ratios of medians.

Peak memory comes after all timing, from one extra untimed run per row on its largest batch: the
peak above what was held before that run (weights and optimizer state excluded; gradients,
activations and caches count). CUDA: ``torch.cuda.max_memory_allocated``. CPU: torch keeps no
allocator statistics there, so it is the growth of the process's resident set (Linux ``VmHWM``,
reset through ``/proc/self/clear_refs``), with glibc told to hand freed blocks back to the system
(``mallopt``, ``malloc_trim``) so that memory freed by earlier rows does not hide it; NaN where
that is not possible. Timing is over by then, so these allocator settings never slow a timed run.
"""

from __future__ import annotations

import copy
import ctypes
import dataclasses
import functools
import math
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from mt_cli.checkpoint import RunDir
from mt_cli.config import Config, load_config
from mt_cli.corpus import load_corpus
from mt_cli.data import (
    Batch,
    TokenBatchSampler,
    collate,
    encode_split,
    encoded_lists,
    filter_long,
    pad_sources,
    sequence_lengths,
)
from mt_cli.decoding import beam_search, greedy_search, max_output_lengths
from mt_cli.device import amp_dtype, autocast, resolve_device
from mt_cli.model import build_model, count_parameters
from mt_cli.optim import make_optimizer
from mt_cli.textbook import naive_greedy_batch, textbook_from
from mt_cli.tokenizer import prepare_tokenizers
from mt_cli.training import token_loss
from mt_cli.translator import Translator, resolve_checkpoint

NAIVE_BATCH = 128
TEST_SPLIT = "test2016"


@dataclass
class Row:
    task: str  # train | translate
    impl: str
    precision: str
    run: Callable[[], int]  # one timed repeat; returns its tokens (train: real src+tgt; translate: generated)
    probe: Callable[[], Any]  # one run on the largest batch, for peak memory
    sentences: int = 0
    seconds: list[float] = field(default_factory=list)
    tokens: int = 0
    peak_mib: float = math.nan
    outputs: dict[int, list[int]] = field(default_factory=dict)  # translate: input index -> ids

    def as_dict(self) -> dict[str, Any]:
        median = statistics.median(self.seconds)
        return {"task": self.task, "impl": self.impl, "precision": self.precision, "seconds": self.seconds,
                "median_s": median, "tokens": self.tokens, "tokens_per_s": self.tokens / median,
                "sentences": self.sentences, "sentences_per_s": self.sentences / median if self.sentences else None,
                "peak_mib": self.peak_mib}  # fmt: skip


def _precision(dtype: torch.dtype | None) -> str:
    return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _load(config: str | Path, overrides: list[str], run: Path | None, checkpoint: str | None, device: str,
          workdir: Path, log: Callable[[str], None]) -> tuple[Translator, str]:  # fmt: skip
    """The model to measure (as a Translator) and a description of its weights."""
    if run is not None:
        # fp32 weights under autocast, as in training, so that the training rows train fp32
        # parameters and both implementations decode the same way (`mt translate` goes one
        # step further and casts the weights to bf16 once).
        tr = Translator.from_run(run, checkpoint, device=device, amp="off")
        tr = dataclasses.replace(tr, dtype=amp_dtype(tr.device, "auto"))
        return tr, f"trained ({resolve_checkpoint(RunDir(run), checkpoint)})"
    cfg = load_config(config, overrides)
    train = load_corpus(cfg.data, ["train"])["train"]
    log(f"training throwaway tokenizers on {len(train):,} pairs (no --run)")
    src_tok, tgt_tok = prepare_tokenizers(cfg, workdir, train["src"], train["tgt"], log=lambda message: None)
    torch.manual_seed(cfg.train.seed)
    target = resolve_device(device)
    model = build_model(cfg.model, src_tok.vocab_size, tgt_tok.vocab_size).to(target).eval()
    weights = "random init (no --run): outputs mostly run to the length limit, a worst case for decoding"
    return Translator(model, src_tok, tgt_tok, cfg, target, amp_dtype(target, "auto")), weights


def _train_batches(tr: Translator, n: int) -> list[Batch]:
    cfg = tr.config
    ds, _ = filter_long(
        encode_split(load_corpus(cfg.data, ["train"])["train"], tr.src_tok, tr.tgt_tok), cfg.data.max_len
    )
    src_ids, tgt_ids = encoded_lists(ds)
    sampler = TokenBatchSampler(
        *sequence_lengths(ds), cfg.train.max_tokens, shuffle=True, seed=cfg.train.seed
    )
    return [
        collate([src_ids[i] for i in b], [tgt_ids[i] for i in b]).to(tr.device) for b in sampler.batches()[:n]
    ]


def _train_row(tr: Translator, batches: list[Batch], impl: str, dtype: torch.dtype | None) -> Row:
    tc, device = tr.config.train, tr.device
    ours = copy.deepcopy(tr.model).train()
    model = ours if impl == "ours" else textbook_from(ours, tr.config.model).train()
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
    return Row("train", name, _precision(dtype), run, lambda: step(largest))


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
    dec = tr.config.decode
    sources = tr.encode_sources(lines, warn=lambda message: None)
    model = copy.deepcopy(tr.model)
    textbook = textbook_from(model, tr.config.model).eval()
    if tr.dtype is not None:
        # As `mt translate` does, for both: weights cast once, not re-cast by autocast every step.
        model.to(dtype=tr.dtype)
        textbook.to(dtype=tr.dtype)
    in_order = [
        list(range(i, min(i + NAIVE_BATCH, len(sources)))) for i in range(0, len(sources), NAIVE_BATCH)
    ]
    searches = {
        "ours greedy": (tr.batches(sources, 1), lambda src, mask: greedy_search(model, src, mask, dec.max_len_a, dec.max_len_b)),
        f"ours beam{beam}": (tr.batches(sources, beam), lambda src, mask: [h[0].tokens for h in beam_search(
            model, src, mask, beam, dec.length_penalty, dec.max_len_a, dec.max_len_b)]),
        "nn.Transformer naive greedy": (in_order, lambda src, mask: naive_greedy_batch(
            textbook, src, max_output_lengths(model, mask, dec.max_len_a, dec.max_len_b))),
    }  # fmt: skip
    rows = []
    for impl, (groups, search) in searches.items():
        batches = [(g, *(t.to(tr.device) for t in pad_sources([sources[i] for i in g]))) for g in groups]
        largest = max(batches, key=lambda b: b[1].numel())
        outputs: dict[int, list[int]] = {}
        rows.append(Row("translate", impl, _precision(tr.dtype), functools.partial(_decode, tr, search, batches, outputs),
                        functools.partial(_decode, tr, search, [largest], {}), len(lines), outputs=outputs))  # fmt: skip
    return rows


def _time(rows: list[Row], repeats: int, device: torch.device, log: Callable[[str], None]) -> None:
    for row in rows:
        row.probe()  # warm-up: kernels, allocator, optimizer state
    for r in range(repeats):
        for row in rows if r % 2 == 0 else rows[::-1]:
            _sync(device)
            start = time.perf_counter()
            row.tokens = row.run()
            _sync(device)
            row.seconds.append(time.perf_counter() - start)
        log(
            f"  repeat {r + 1}/{repeats}: "
            + " | ".join(f"{row.impl} {row.precision} {row.seconds[-1]:.2f} s" for row in rows)
        )


def _status_kib(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))


def _peak_mib(device: torch.device, probe: Callable[[], Any], libc: Any) -> float:
    """Peak memory above the start while ``probe()`` runs (see the module doc)."""
    if device.type == "cuda":
        _sync(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        probe()
        _sync(device)
        return (torch.cuda.max_memory_allocated(device) - base) / 2**20
    try:
        libc.malloc_trim(0)
        base = _status_kib("VmRSS")
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")  # reset VmHWM to the current resident set
        probe()
        return (_status_kib("VmHWM") - base) / 1024
    except (OSError, AttributeError, StopIteration, ValueError):
        return math.nan


def _measure_peaks(rows: list[Row], device: torch.device) -> None:
    libc = None
    if device.type == "cpu":
        try:
            libc = ctypes.CDLL("libc.so.6")
            libc.mallopt(-3, 16384)  # M_MMAP_THRESHOLD: blocks >= 16 KiB are mapped and unmapped when freed
        except (OSError, AttributeError):
            pass
    try:
        for row in rows:
            row.peak_mib = _peak_mib(device, row.probe, libc)
    finally:
        if (
            libc is not None
        ):  # a fixed threshold cannot be undone; 32 MiB is where glibc's dynamic one tops out
            libc.mallopt(-3, 32 * 2**20)


def run_bench(config: str | Path, overrides: list[str], run: Path | None, checkpoint: str | None, device: str,
              sentences: int | None,
              repeats: int, decode_repeats: int, batches: int, beam: int,
              log: Callable[[str], None] = print) -> dict[str, Any]:  # fmt: skip
    """Measure everything; returns the report that ``format_report`` prints and --json writes."""
    import datasets

    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="mt-bench-") as workdir:
        tr, weights = _load(config, overrides, run, checkpoint, device, Path(workdir), log)
    cfg: Config = tr.config
    lines = list(load_corpus(cfg.data, [TEST_SPLIT])[TEST_SPLIT]["src"])[:sentences]
    train_batches = _train_batches(tr, batches)
    amp = amp_dtype(tr.device, "auto")
    train_rows = [_train_row(tr, train_batches, impl, dtype) for dtype in dict.fromkeys([None, amp])
                  for impl in ("ours", "textbook")]  # fmt: skip
    translate_rows = _translate_rows(tr, lines, beam)
    log(f"training: {len(train_rows)} rows x {repeats} repeats of {len(train_batches)} batches")
    _time(train_rows, repeats, tr.device, log)
    log(f"translation: {len(translate_rows)} rows x {decode_repeats} repeats of {len(lines)} sentences")
    _time(translate_rows, decode_repeats, tr.device, log)
    _measure_peaks(train_rows + translate_rows, tr.device)

    rows = [row.as_dict() for row in train_rows + translate_rows]
    greedy, beamed, naive = (row.as_dict() for row in translate_rows)
    ratios = {f"train {r['precision']}: ours / nn.Transformer tokens/s": r["tokens_per_s"] / t["tokens_per_s"]
              for r, t in zip(rows[0:len(train_rows):2], rows[1:len(train_rows):2])}  # fmt: skip
    if amp is not None:
        ratios[f"train ours: {_precision(amp)} / fp32 tokens/s"] = (
            rows[2]["tokens_per_s"] / rows[0]["tokens_per_s"]
        )
    ratios["greedy: naive nn.Transformer / ours time"] = naive["median_s"] / greedy["median_s"]
    ratios[f"beam{beam} / greedy time (ours)"] = beamed["median_s"] / greedy["median_s"]
    same = sum(translate_rows[0].outputs.get(i, []) == ids for i, ids in translate_rows[2].outputs.items())
    return {
        "device": str(tr.device) + (f" ({torch.cuda.get_device_name(tr.device)})" if tr.device.type == "cuda" else
                                    f" ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"),
        "torch": torch.__version__,
        "model": {"d_model": cfg.model.d_model, "encoder_layers": cfg.model.encoder_layers,
                  "decoder_layers": cfg.model.decoder_layers, "parameters": count_parameters(tr.model),
                  "src_vocab": tr.src_tok.vocab_size, "tgt_vocab": tr.tgt_tok.vocab_size},
        "weights": weights,
        "train_batches": len(train_batches), "repeats": repeats, "decode_repeats": decode_repeats,
        "sentences": len(lines), "beam": beam, "naive_matches_greedy": same / max(len(lines), 1),
        "rows": rows, "ratios": ratios,
    }  # fmt: skip


def format_report(report: dict[str, Any]) -> list[str]:
    m = report["model"]
    lines = [
        f"device {report['device']} | torch {report['torch']}",
        f"model d_model={m['d_model']} layers={m['encoder_layers']}+{m['decoder_layers']} "
        f"{m['parameters'] / 1e6:.2f}M parameters | weights: {report['weights']}",
        f"train: {report['train_batches']} batches x {report['repeats']} timed repeats; translate: "
        f"{report['sentences']} {TEST_SPLIT} sentences x {report['decode_repeats']} timed repeats (medians)",
        "",
        f"{'task':<10}{'implementation':<29}{'prec':<6}{'median s':>10}{'tokens/s':>11}{'sent/s':>9}{'peak MiB':>10}",
    ]
    for r in report["rows"]:
        sent = f"{r['sentences_per_s']:.1f}" if r["sentences_per_s"] else "-"
        lines.append(f"{r['task']:<10}{r['impl']:<29}{r['precision']:<6}{r['median_s']:>10.3f}"
                     f"{r['tokens_per_s']:>11,.0f}{sent:>9}{r['peak_mib']:>10.1f}")  # fmt: skip
    lines.append("")
    for name, value in report["ratios"].items():
        lines.append(f"{name:<46}{value:>8.2f}x")
    lines.append(f"{'naive output equals our greedy':<46}{report['naive_matches_greedy']:>9.1%}")
    lines += [
        "",
        "tokens/s: train = real source+target tokens per forward+backward+AdamW step; "
        "translate = generated tokens (EOS included)",
        "peak MiB: above what the row held before (weights, optimizer state), on its largest batch; "
        + (
            "CUDA allocated memory"
            if report["device"].startswith("cuda")
            else "growth of the process's resident set"
        ),
    ]
    return lines
