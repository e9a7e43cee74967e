"""Failures as a user meets them, through real `mt` processes: one line on stderr, the documented
exit code (2: the input, 3: the machine), no traceback, and nothing lost or half-written.

A full disk is a per-process file size limit (RLIMIT_FSIZE; Python ignores SIGXFSZ, so writes
past it fail with EFBIG), and a place nobody may write is /sys: both work for root and for
anyone else, so no test depends on who runs the suite.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from mt_cli.data.prepared import PreparedCorpus
from mt_cli.disk.layout import RunDir
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.disk.runlock import read_holder

# Seconds-sized training: 200 pairs, fp32, no BLEU, no closing test scores.
TINY = [
    "--config",
    "tiny",
    *("--set", "data.train_limit=200", "--set", "train.max_tokens=1024", "--set", "train.amp=off"),
    *("--set", "train.val_bleu=false", "--set", "train.test_at_end=false"),
]
FULL_DISK = 500_000  # bytes a file may grow to: the tokenizers fit (~250 kB), no checkpoint (~1 MB) does
UNWRITABLE = Path("/sys")  # no new entries here, not even for root


def mt(
    *args: str | bytes, cwd: Path, file_size_limit: int | None = None, timeout: int = 300
) -> subprocess.CompletedProcess:
    def limit() -> None:
        if file_size_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    result = subprocess.run(
        [sys.executable, "-m", "mt_cli", *args],
        capture_output=True,
        cwd=cwd,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        preexec_fn=limit,
    )
    result.stdout, result.stderr = result.stdout.decode("utf-8"), result.stderr.decode("utf-8")
    return result


def one_error_line(result: subprocess.CompletedProcess, code: int) -> str:
    """The one line of stderr that says what went wrong (after any log lines), asserting the exit code."""
    assert result.returncode == code, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and result.stderr.rstrip().endswith(errors[0]), result.stderr
    return errors[0]


def files_in(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (temporary and hidden ones included) with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@dataclass(frozen=True)
class Contended:
    """A run trained by a first `mt train` that a second `mt train` tried to share."""

    run: Path
    first_pid: int
    first: subprocess.CompletedProcess
    second: subprocess.CompletedProcess
    listing_while_held: list[str]


@pytest.fixture(scope="module")
def contended(tmp_path_factory: pytest.TempPathFactory) -> Contended:
    """`mt train --run R` is stopped (SIGSTOP) as soon as it holds R's lock; a second `mt train
    --run R` runs meanwhile; then the first goes on and finishes."""
    work = tmp_path_factory.mktemp("contended")
    run = work / "run"
    command = [
        sys.executable,
        "-m",
        "mt_cli",
        "train",
        *TINY,
        "--set",
        "train.max_epochs=1",
        "--run",
        str(run),
    ]
    first = subprocess.Popen(command, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while read_holder(RunDir(run).lock).get("pid") != first.pid:
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()
            time.sleep(0.02)
        os.kill(first.pid, signal.SIGSTOP)
        try:
            listing = sorted(p.name for p in run.iterdir())
            second = mt("train", *TINY, "--set", "model.d_model=32", "--run", str(run), cwd=work)
            assert sorted(p.name for p in run.iterdir()) == listing  # the second made nothing
        finally:
            os.kill(first.pid, signal.SIGCONT)
        stdout, stderr = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    done = subprocess.CompletedProcess(command, first.returncode, stdout.decode(), stderr.decode())
    return Contended(run, first.pid, done, second, listing)


def test_a_second_writer_is_refused_naming_the_first_whose_run_is_intact_and_resumes(
    contended: Contended,
) -> None:
    run = RunDir(contended.run)
    refused = one_error_line(contended.second, 2)
    assert f"is in use by `mt train` (pid {contended.first_pid} on " in refused
    assert contended.first.returncode == 0, contended.first.stderr[-3000:]
    assert yaml.safe_load(run.config.read_text(encoding="utf-8"))["model"]["d_model"] == 64  # the first's
    assert run.lock.name in contended.listing_while_held  # the first held the lock from the start
    assert run.last.is_file() and run.best.is_file() and not run.lock.exists()
    assert read_lines(run.log) and all("d_model" not in line for line in read_lines(run.log))
    resumed = mt(
        "train", "--run", str(run.root), "--resume", "--set", "train.max_epochs=2", cwd=run.root.parent
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in run.log.read_text(encoding="utf-8") and not run.lock.exists()


def test_a_full_disk_while_saving_a_checkpoint_is_exit_3_and_keeps_the_earlier_one(
    contended: Contended, tmp_path: Path
) -> None:
    run = RunDir(shutil.copytree(contended.run, tmp_path / "run"))
    before = files_in(run.checkpoints)
    result = mt(
        "train", "--run", str(run.root), "--resume", "--set", "train.max_epochs=9",
        cwd=tmp_path, file_size_limit=FULL_DISK,
    )  # fmt: skip
    line = one_error_line(result, 3)
    assert f"cannot write {run.checkpoints}/" in line and "too large" in line
    assert files_in(run.checkpoints) == before  # every checkpoint as it was, no temporary file beside them
    assert not run.lock.exists()


@pytest.mark.parametrize(
    "export_format",
    [
        "ctranslate2",
        pytest.param("huggingface", marks=pytest.mark.slow),  # safetensors reports it in its own words
        pytest.param("argos", marks=pytest.mark.slow),
    ],
)
def test_a_full_disk_while_exporting_is_exit_3_and_leaves_nothing(
    contended: Contended, tmp_path: Path, export_format: str
) -> None:
    target = tmp_path / "export"
    result = mt(
        "export", "-f", export_format, "--run", str(contended.run), "-o", str(target),
        cwd=tmp_path, file_size_limit=FULL_DISK,
    )  # fmt: skip
    assert f"cannot write {tmp_path}/" in one_error_line(result, 3)
    assert list(tmp_path.iterdir()) == []


def test_unwritable_places_are_refused_before_any_work(contended: Contended, tmp_path: Path) -> None:
    for command in ("train", "prepare"):
        result = mt(command, *TINY, "--run", str(UNWRITABLE / "mt-run"), cwd=tmp_path)
        assert f"cannot create run directory {UNWRITABLE / 'mt-run'}" in one_error_line(result, 2)
    for command in (["export", "-f", "ctranslate2"], ["average", "--last", "2"], ["plot"]):
        output = UNWRITABLE / "mt-output"
        result = mt(*command, "--run", str(contended.run), "-o", str(output), cwd=tmp_path)
        assert f"--output {output}: directory {UNWRITABLE} is not writable" in one_error_line(result, 2)
    assert list(tmp_path.iterdir()) == []


def test_a_run_that_does_not_exist_is_named_and_not_created(tmp_path: Path) -> None:
    result = mt("export", "-f", "ctranslate2", "--run", "typo", cwd=tmp_path)
    assert "run directory typo does not exist" in one_error_line(result, 2)
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_that_is_a_directory_or_not_weights_is_one_line(
    contended: Contended, tmp_path: Path
) -> None:
    import torch

    checkpoints = RunDir(contended.run).checkpoints
    result = mt(
        "translate", "Ein Hund.", "--run", str(contended.run), "--checkpoint", str(checkpoints), cwd=tmp_path
    )
    assert f"checkpoint {checkpoints} is a directory" in one_error_line(result, 2)
    payload = torch.load(RunDir(contended.run).best, weights_only=True)
    bad = tmp_path / "bad.pt"
    torch.save({**payload, "model": [0.5, 1.5]}, bad)
    result = mt("translate", "Ein Hund.", "--run", str(contended.run), "--checkpoint", str(bad), cwd=tmp_path)
    assert "its model entry is not a set of named weights" in one_error_line(result, 2)


def test_text_arguments_that_are_not_utf8_are_one_line(contended: Contended, tmp_path: Path) -> None:
    result = mt("translate", b"Hund \xff", "--run", str(contended.run), cwd=tmp_path)
    assert "the argument TEXT is not UTF-8 text (byte 0xff at character 6)" in one_error_line(result, 2)
    result = mt("config", "--config", "tiny", "--set", b"model.activation=\xff", cwd=tmp_path)
    assert "--set is not UTF-8 text (byte 0xff" in one_error_line(result, 2)


def test_a_truncated_gzip_training_split_is_one_line_naming_it(tmp_path: Path) -> None:
    """The training split is streamed (by `mt prepare`, `mt train`): the damage shows midway."""
    corpus = tmp_path / "multi30k"
    shutil.copytree(SHIPPED_MULTI30K, corpus)
    train = corpus / "train.de.gz"
    train.write_bytes(train.read_bytes()[:1000])  # some 40 lines of the 200 the recipe reads
    run = tmp_path / "run"
    result = mt("prepare", *TINY, "--set", f"data.dir={corpus}", "--run", str(run), cwd=tmp_path)
    line = one_error_line(result, 2)
    assert line == f"error: {train} is truncated (the compressed data ends early); copy it again"
    assert not run.exists()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda data: data[:-8] + bytes(4) + data[-4:],
            "is damaged (CRC check failed",
        ),  # trailer: CRC, length
        (gzip.decompress, "is not gzip-compressed (Not a gzipped file"),  # plain text named .gz
    ],
)
def test_a_damaged_gzip_file_is_one_line_naming_it(tmp_path: Path, damage, message: str) -> None:
    hyp, ref = tmp_path / "hyp.en.gz", tmp_path / "ref.en"
    ref.write_text("A dog runs.\nTwo children play.\n", encoding="utf-8")
    hyp.write_bytes(damage(gzip.compress(ref.read_bytes())))
    result = mt("eval", "--hyp", str(hyp), "--ref", str(ref), cwd=tmp_path)
    assert f"error: {hyp} {message}" in one_error_line(result, 2)


@pytest.mark.slow  # trains two tokenizers: a few seconds; test_formats.py checks the same readers directly
def test_tables_that_start_with_a_byte_order_mark(tmp_path: Path) -> None:
    de, en = (read_lines(SHIPPED_MULTI30K / f"train.{lang}.gz")[:300] for lang in ("de", "en"))
    bom = "\ufeff"
    tsv = tmp_path / "train.tsv"
    tsv.write_text(bom + "de\ten\n" + "".join(f"{s}\t{t}\n" for s, t in zip(de, en)), encoding="utf-8")
    jsonl = tmp_path / "val.jsonl"
    records = (json.dumps({"de": s, "en": t}, ensure_ascii=False) for s, t in zip(de[:50], en[:50]))
    jsonl.write_text(bom + "\n".join(records) + "\n", encoding="utf-8")
    recipe = {
        "data": {
            "source": "table",
            "tables": {"train": [str(tsv)], "val": [str(jsonl)], "test2016": [str(jsonl)]},
            "columns": ["de", "en"],
        },
        "tokenizer": {"src_vocab_size": 200, "tgt_vocab_size": 200},
    }
    config = tmp_path / "bom.yaml"
    config.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    result = mt("prepare", "--config", str(config), "--run", str(tmp_path / "run"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "train: 300 pairs | val: 50 pairs" in result.stdout
    prepared = next((tmp_path / "run" / "prepared").iterdir())
    corpus = PreparedCorpus.open(prepared)
    assert (corpus.text("src", 0), corpus.text("tgt", 0)) == (de[0], en[0])
