"""``mt bench --engines``: a trained run in every engine, side by side on test2016.

Rows: mt in fp32 and in its default precision, a two-model ensemble of mt (the run with itself:
what two members cost), CTranslate2 float32 and int8, and the Hugging Face Marian export, each
greedy and with the recipe's beam. Every row runs in a child process of its own (``python -m
mt_cli.tools.engines``) under ``/usr/bin/time -v``, whose peak RSS is that engine's alone. (Not
``os.wait4`` on a direct child: Python starts children with vfork, and Linux then counts the
parent's pages in the child's peak.) mt's decoding workers (``decode/processes.py``) report
their own peaks, added to the row's. The child loads the engine, translates 32 lines to warm up,
then times two passes over all lines with ``threads`` threads: the first ("cold") meets batch
shapes for the first time (kernels chosen and caches filled per shape), the second is the
steady speed a server or a long job sees, and the one the table ranks by. The parent
scores each output (sacreBLEU) and counts the lines identical to mt fp32's output with the same
beam. The exports are made first, into a temporary directory, and timed.
"""

from __future__ import annotations

import enum
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mt_cli.config.card import card_from_dict
from mt_cli.config.options import DEFAULT_OPTIONS, TranslateOptions
from mt_cli.decode.engine import Engine
from mt_cli.decode.hypotheses import output_limit
from mt_cli.disk.layout import ExportFiles
from mt_cli.errors import RunFailure

if TYPE_CHECKING:
    from mt_cli.trained import TrainedModel

GNU_TIME = "/usr/bin/time"  # its -v report is the peak RSS of the one process it runs
WARM_UP_LINES = 32
HF_BATCH = 64  # sentences per generate() call


class Case(str, enum.Enum):
    """The rows, in order; the first is the reference of "= mt fp32"."""

    MT_FP32 = "mt-fp32"
    MT = "mt"
    MT_ENSEMBLE2 = "mt-ensemble2"  # the run ensembled with itself: the cost of two members
    CT2_FLOAT32 = "ctranslate2-float32"
    CT2_INT8 = "ctranslate2-int8"
    HUGGINGFACE = "huggingface"


class HuggingFaceEngine:
    """The Marian export through ``generate``, each sentence under mt's own length limit."""

    def __init__(self, model_dir: Path) -> None:
        from transformers import MarianMTModel, MarianTokenizer

        self.card = card_from_dict(json.loads((model_dir / ExportFiles.CARD).read_text(encoding="utf-8")))
        self.model = MarianMTModel.from_pretrained(model_dir).eval()
        self.tokenizer = MarianTokenizer.from_pretrained(model_dir)
        self.origin = str(model_dir)

    def translate_lines(self, lines: Sequence[str], options: TranslateOptions = DEFAULT_OPTIONS) -> list[str]:
        """One translation per line with ``options``' beam and length penalty (the card's if unset)."""
        import torch

        dec = self.card.decode
        options = self.card.resolve(options)
        ids = self.tokenizer([line.strip() for line in lines])["input_ids"]
        groups: dict[int, list[int]] = defaultdict(list)
        for index, source in enumerate(ids):
            if len(source) > 1:
                groups[
                    output_limit(len(source), dec.max_len_a, dec.max_len_b, self.card.model.max_positions)
                ].append(index)
        out = [""] * len(lines)
        for limit, indices in groups.items():
            for start in range(0, len(indices), HF_BATCH):
                chunk = indices[start : start + HF_BATCH]
                batch = self.tokenizer([lines[i].strip() for i in chunk], return_tensors="pt", padding=True)
                with torch.inference_mode():
                    generated = self.model.generate(
                        **batch,
                        num_beams=options.beam_size,
                        length_penalty=options.alpha,
                        early_stopping=True,
                        do_sample=False,
                        max_new_tokens=limit,
                    )
                for i, text in zip(chunk, self.tokenizer.batch_decode(generated, skip_special_tokens=True)):
                    out[i] = text
        return out


def _open(case: Case, run: Path, checkpoint: str | None, model_dir: Path | None, threads: int) -> Engine:
    from mt_cli.decode.ctranslate2 import CTranslate2Engine
    from mt_cli.decode.members import ensemble_of
    from mt_cli.decode.translator import Translator
    from mt_cli.runtime.precision import ComputeType
    from mt_cli.trained import load_trained

    def mt(compute_type: ComputeType = ComputeType.DEFAULT) -> Translator:
        return Translator.of(load_trained(run, checkpoint), "cpu", compute_type)

    opened: dict[Case, Callable[[], Engine]] = {
        Case.MT: mt,
        Case.MT_FP32: lambda: mt(ComputeType.FLOAT32),
        Case.MT_ENSEMBLE2: lambda: ensemble_of([mt() for _ in range(2)]),
        Case.CT2_FLOAT32: lambda: CTranslate2Engine(model_dir, threads=threads),
        Case.CT2_INT8: lambda: CTranslate2Engine(model_dir, threads=threads),
        Case.HUGGINGFACE: lambda: HuggingFaceEngine(model_dir),
    }
    return opened[case]()


def child(job: dict[str, Any]) -> None:
    """One row, in this process: load, warm up, time one pass, write the lines, print the time."""
    import torch

    torch.set_num_threads(job["threads"])
    model_dir = Path(job["model_dir"]) if job["model_dir"] else None
    start = time.perf_counter()
    engine = _open(Case(job["case"]), Path(job["run"]), job["checkpoint"], model_dir, job["threads"])
    load_seconds = time.perf_counter() - start
    lines = Path(job["lines"]).read_text(encoding="utf-8").splitlines()
    options = TranslateOptions(beam=job["beam"])
    engine.translate_lines(lines[:WARM_UP_LINES], options)
    passes = []
    for _ in range(2):  # cold: shapes not met before; steady: what a server or a long job sees
        start = time.perf_counter()
        out = engine.translate_lines(lines, options)
        passes.append(time.perf_counter() - start)
    Path(job["out"]).write_text("".join(line + "\n" for line in out), encoding="utf-8")
    workers = _children_peak_kib()  # mt's decoding workers, still alive with the engine
    timing = {"cold_seconds": passes[0], "seconds": passes[1], "load_seconds": load_seconds}
    print(json.dumps({**timing, "workers_peak_kib": workers}))


def child_pids(pid: int) -> list[int]:
    """The child processes of process ``pid``, from every one of its threads (Linux's /proc)."""
    tasks = Path(f"/proc/{pid}/task").iterdir()
    return [int(child) for task in tasks for child in _proc_text(task / "children").split()]


def _children_peak_kib() -> list[int]:
    """The peak RSS (VmHWM, KiB) of each live child process of this one."""
    statuses = (_proc_text(Path(f"/proc/{pid}/status")) for pid in child_pids(os.getpid()))
    lines = (line for status in statuses for line in status.splitlines())
    return [int(line.split()[1]) for line in lines if line.startswith("VmHWM:")]


def _proc_text(path: Path) -> str:
    """A /proc file's text, or "" for a thread or process that ended after it was listed."""
    try:
        return path.read_text()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def run_engine_bench(
    run: Path, checkpoint: str | None, sentences: int | None, beams: Sequence[int], log: Callable[[str], None]
) -> dict[str, Any]:
    """Every engine's rows for ``beams`` on test2016 (the first ``sentences`` lines)."""
    from mt_cli.data.corpus import load_corpus
    from mt_cli.decode.evaluate import score
    from mt_cli.trained import load_trained

    trained = load_trained(run, checkpoint)
    corpus = load_corpus(trained.card.data, ["test2016"])["test2016"]
    sources, references = corpus["src"][:sentences], corpus["tgt"][:sentences]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mt-engines-") as tmp:
        work = Path(tmp)
        exports = _exports(trained, work, log)
        (work / "lines.txt").write_text("".join(line + "\n" for line in sources), encoding="utf-8")
        reference_outputs: dict[int, list[str]] = {}
        for beam in beams:
            for case in Case:
                log(f"{case.value}, beam {beam}")
                row, out = _row(case, beam, run, checkpoint, exports, work)
                reference_outputs.setdefault(beam, out)
                same = sum(a == b for a, b in zip(out, reference_outputs[beam]))
                row.update(bleu=round(score(out, references).bleu, 2), same_as_mt_fp32=same / len(out))
                rows.append(row)
    return {"run": str(run), "sentences": len(sources), "threads": os.cpu_count(), "rows": rows}


def _exports(trained: TrainedModel, work: Path, log: Callable[[str], None]) -> dict[Case, dict[str, Any]]:
    from mt_cli.export.ctranslate2 import Quantization, export_ctranslate2
    from mt_cli.export.huggingface import export_huggingface

    makers: dict[Case, Callable[[Path], Path]] = {
        Case.CT2_FLOAT32: lambda out: export_ctranslate2(trained, out, Quantization.FLOAT32),
        Case.CT2_INT8: lambda out: export_ctranslate2(trained, out, Quantization.INT8),
        Case.HUGGINGFACE: lambda out: export_huggingface(trained, out),
    }
    checkpoint_size = trained.checkpoint.stat().st_size
    members = {Case.MT: 1, Case.MT_FP32: 1, Case.MT_ENSEMBLE2: 2}  # mt's rows read the checkpoint itself
    made: dict[Case, dict[str, Any]] = {
        case: {"dir": None, "size": count * checkpoint_size, "export_seconds": 0.0}
        for case, count in members.items()
    }
    for case, make in makers.items():
        start = time.perf_counter()
        out = make(work / case.value)
        weights = sum(p.stat().st_size for p in out.iterdir() if p.name in ("model.bin", "model.safetensors"))
        made[case] = {"dir": out, "size": weights, "export_seconds": time.perf_counter() - start}
        log(f"exported {case.value} in {made[case]['export_seconds']:.1f} s")
    return made


def bench_job(
    case: Case,
    beam: int,
    run: Path,
    checkpoint: str | None,
    model_dir: Path | None,
    lines: Path,
    out: Path,
    threads: int,
) -> dict[str, Any]:
    """What one row's process (``child``) is given: the engine to open, the lines to translate,
    where to write them, the beam and how many threads."""
    return {
        "case": case.value,
        "run": str(run),
        "checkpoint": checkpoint,
        "model_dir": str(model_dir) if model_dir else None,
        "lines": str(lines),
        "out": str(out),
        "beam": beam,
        "threads": threads,
    }


def _row(
    case: Case, beam: int, run: Path, checkpoint: str | None, exports: dict[Case, dict[str, Any]], work: Path
) -> tuple[dict[str, Any], list[str]]:
    out_path = work / f"{case.value}-beam{beam}.txt"
    lines = work / "lines.txt"
    job = bench_job(case, beam, run, checkpoint, exports[case]["dir"], lines, out_path, os.cpu_count() or 1)
    if not Path(GNU_TIME).is_file():
        raise RunFailure(f"{GNU_TIME} measures each engine's memory; install GNU time (apt-get install time)")
    done = subprocess.run(
        [GNU_TIME, "-v", sys.executable, "-m", "mt_cli.tools.engines", json.dumps(job)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        child_errors = done.stderr.split("\tCommand being timed")[0].strip().splitlines()
        cause = child_errors[-1] if child_errors else f"exit status {done.returncode}"
        raise RunFailure(f"the {case.value} row failed: {cause}")
    timing = json.loads(done.stdout.strip().splitlines()[-1])
    peak_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    out = out_path.read_text(encoding="utf-8").splitlines()
    row = {
        "engine": case.value,
        "beam": beam,
        "sentences_per_second": round(len(out) / timing["seconds"], 2),
        "cold_sentences_per_second": round(len(out) / timing["cold_seconds"], 2),
        "load_seconds": round(timing["load_seconds"], 2),
        # The row's process and its decoding workers, each at its peak: pages they share are
        # counted in each, so this bounds the memory from above.
        "peak_rss_mib": round((peak_kib + sum(timing["workers_peak_kib"])) / 1024, 1),
        "processes": 1 + len(timing["workers_peak_kib"]),
        "size_mib": round(exports[case]["size"] / 2**20, 1),
    }
    return row, out


def format_engine_report(report: dict[str, Any]) -> list[str]:
    lines = [
        f"{report['run']}: test2016, {report['sentences']} sentences, {report['threads']} threads",
        f"{'engine':<22}{'beam':>5}{'sent/s':>9}{'cold':>9}{'BLEU':>8}{'= mt fp32':>11}{'size MiB':>10}"
        f"{'peak RSS MiB':>14}",
    ]
    for row in report["rows"]:
        lines.append(
            f"{row['engine']:<22}{row['beam']:>5}{row['sentences_per_second']:>9.1f}"
            f"{row['cold_sentences_per_second']:>9.1f}{row['bleu']:>8.2f}"
            f"{row['same_as_mt_fp32']:>10.1%}{row['size_mib']:>10.1f}{row['peak_rss_mib']:>14.0f}"
        )
    return lines


if __name__ == "__main__":
    child(json.loads(sys.argv[1]))
