# GPU decoding, mt's engine against the GPU baseline, on test2016 in batches (scripts/gpu-check.sh):
#   python scripts/gpu-decode.py RUN OUT.json
"""mt's engine in bf16 (fp16 where the GPU has no bf16) against CTranslate2 float16 on the same GPU,
or, where CTranslate2's CUDA build does not run there, against transformers' ``generate`` of mt's
Hugging Face export (fp16). Greedy and beam 5 on the 1,000 lines of test2016: sentences/s of a
timed pass after a warm-up, BLEU, and the share of lines equal to mt's. Writes OUT.json."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import sacrebleu
import torch

from mt_cli.api import load
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.errors import MtError

Decode = Callable[[list[str], int], list[str]]
BEAMS = {"greedy": 1, "beam5": 5}
HF_BATCH = 128  # sentences per generate() call, sorted by length


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(decode: Decode, lines: list[str], beam: int) -> tuple[list[str], float]:
    decode(lines[:64], beam)  # warm-up: kernels, the allocator's pools
    sync()
    started = time.perf_counter()
    out = decode(lines, beam)
    sync()
    return out, len(lines) / (time.perf_counter() - started)


def mt_engine(run: Path, device: str) -> Decode:
    half = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    model = load(run, device=device, compute_type=half if device == "cuda" else None)
    return lambda lines, beam: [t.text for t in model.translate(lines, beam=beam, scores=beam > 1)]


def ctranslate2_engine(run: Path, device: str) -> Decode:
    compute = "float16" if device == "cuda" else "float32"
    model = load(run, engine="ctranslate2", device=device, compute_type=compute)
    return lambda lines, beam: [t.text for t in model.translate(lines, beam=beam)]


def transformers_engine(run: Path, work: Path, device: str) -> Decode:
    from transformers import MarianMTModel, MarianTokenizer

    from mt_cli.export.huggingface import export_huggingface
    from mt_cli.trained import load_trained

    exported = export_huggingface(load_trained(run), work / "hf")
    tokenizer = MarianTokenizer.from_pretrained(exported)
    dtype = torch.float16 if device == "cuda" else torch.float32
    model = MarianMTModel.from_pretrained(exported).to(device, dtype).eval()

    def decode(lines: list[str], beam: int) -> list[str]:
        order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
        out = [""] * len(lines)
        for start in range(0, len(order), HF_BATCH):
            chunk = order[start : start + HF_BATCH]
            inputs = tokenizer([lines[i] for i in chunk], return_tensors="pt", padding=True).to(device)
            with torch.inference_mode():
                ids = model.generate(**inputs, num_beams=beam, do_sample=False)
            for i, text in zip(chunk, tokenizer.batch_decode(ids, skip_special_tokens=True)):
                out[i] = text.strip()
        return out

    return decode


def baseline(
    run: Path, work: Path, device: str, only: str | None
) -> tuple[str | None, Decode | None, list[str]]:
    """CTranslate2 float16 where it runs on this GPU, else transformers; with why each failed."""
    failures = []
    try:
        if only == "transformers":
            raise ImportError("skipped (--only transformers)")
        return "ctranslate2", ctranslate2_engine(run, device), failures
    except (MtError, ImportError, OSError, RuntimeError, ValueError) as err:
        failures.append(f"ctranslate2: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
    try:
        return "transformers generate", transformers_engine(run, work, device), failures
    except (MtError, ImportError, OSError, RuntimeError, ValueError) as err:
        failures.append(f"transformers: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
    return None, None, failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="cuda", help="cuda (default), or cpu to try the script out")
    parser.add_argument("--only", choices=("ctranslate2", "transformers"), help="skip the other baseline")
    args = parser.parse_args()
    lines = read_lines(SHIPPED_MULTI30K / "test_2016_flickr.de.gz")
    refs = read_lines(SHIPPED_MULTI30K / "test_2016_flickr.en.gz")
    name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    report: dict = {"device": name, "lines": len(lines)}
    ours = mt_engine(args.run, args.device)
    with tempfile.TemporaryDirectory() as work:
        name, theirs, failures = baseline(args.run, Path(work), args.device, args.only)
        report.update(baseline=name, baseline_failures=failures)
        for label, beam in BEAMS.items():
            mt_out, mt_rate = timed(ours, lines, beam)
            row = {"mt_sentences_per_s": mt_rate, "mt_bleu": sacrebleu.corpus_bleu(mt_out, [refs]).score}
            if theirs is not None:
                out, rate = timed(theirs, lines, beam)
                row.update(
                    baseline_sentences_per_s=rate,
                    baseline_bleu=sacrebleu.corpus_bleu(out, [refs]).score,
                    ratio=mt_rate / rate,
                    same_lines=sum(a == b for a, b in zip(mt_out, out)) / len(lines),
                )
            report[label] = row
            print(label, json.dumps(row), flush=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
