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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
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
    *args: str | bytes,
    cwd: Path,
    file_size_limit: int | None = None,
    timeout: int = 300,
    umask: int | None = None,
    closed: tuple[int, ...] = (),
    prefix: Sequence[str] = (),
) -> subprocess.CompletedProcess:
    """`mt ARGS` in ``cwd``: with a file size limit, a umask, standard descriptors ``closed`` (0 for
    ``<&-``, 1 for ``>&-``), or started by a ``prefix`` command (``read_only``'s)."""

    def setup() -> None:
        if file_size_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))
        if umask is not None:
            os.umask(umask)
        for fd in closed:
            os.close(fd)

    result = subprocess.run(
        [*prefix, sys.executable, "-m", "mt_cli", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        cwd=cwd,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        preexec_fn=setup,
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


# Issue 39, section 3: defects found by a read-through, each through the real process.


def test_outputs_get_the_mode_a_shell_would_give(contended: Contended, tmp_path: Path) -> None:
    """New outputs: 0666 less the umask, as `>` makes them; a rewritten file keeps its mode."""
    run = str(contended.run)
    (tmp_path / "src.de").write_text("Ein Hund.\nZwei Kinder.\n", encoding="utf-8")
    (tmp_path / "ref.en").write_text("A dog.\nTwo children.\n", encoding="utf-8")
    translated = tmp_path / "translated.en"
    result = mt("translate", "Ein Hund.", "--run", run, "-o", str(translated), cwd=tmp_path, umask=0o002)
    assert result.returncode == 0, result.stderr[-3000:]
    assert translated.stat().st_mode & 0o777 == 0o664
    scores = tmp_path / "scores.tsv"
    inputs = ("--src", str(tmp_path / "src.de"), "--tgt", str(tmp_path / "ref.en"))
    result = mt("score", *inputs, "--run", run, "-o", str(scores), cwd=tmp_path, umask=0o022)
    assert result.returncode == 0, result.stderr[-3000:]
    assert scores.stat().st_mode & 0o777 == 0o644
    hypotheses = tmp_path / "hyp.en"
    hypotheses.write_text("earlier work\n", encoding="utf-8")
    hypotheses.chmod(0o664)
    sources = ("--src", str(tmp_path / "src.de"), "--ref", str(tmp_path / "ref.en"))
    result = mt("eval", *sources, "--run", run, "-o", str(hypotheses), cwd=tmp_path, umask=0o077)
    assert result.returncode == 0, result.stderr[-3000:]
    assert hypotheses.stat().st_mode & 0o777 == 0o664 and len(read_lines(hypotheses)) == 2


@pytest.mark.parametrize("command", ["translate", "score", "eval"])
def test_sigterm_is_ctrl_c_one_line_exit_130_and_no_temporary_file(
    contended: Contended, tmp_path: Path, command: str
) -> None:
    """SIGTERM (what `timeout`, systemd and `docker stop` send) stops a command as Ctrl-C does."""
    lines = read_lines(SHIPPED_MULTI30K / "train.de.gz")[:3000]
    source = tmp_path / "src.de"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    kept = tmp_path / "out.txt"
    kept.write_text("earlier work\n", encoding="utf-8")
    reads = {
        "translate": ["--buffer-size", "1"],  # standard input: one line at a time, then waits for more
        "score": ["--buffer-size", "1"],
        "eval": ["--src", str(source), "--ref", str(source), "--beam", "5"],  # 3,000 lines: a while
    }[command]
    process = subprocess.Popen(
        [sys.executable, "-m", "mt_cli", command, "--run", str(contended.run), "-o", str(kept), *reads],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        process.stdin.write(b"Ein Hund.\tA dog.\n" if command == "score" else b"Ein Hund.\n")
        process.stdin.flush()
        deadline = time.monotonic() + 120  # the temporary output appears when the work begins
        while not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]:
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
            time.sleep(0.05)
        time.sleep(1.0)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 130
        stderr = process.stderr.read().decode("utf-8")
    finally:
        if process.poll() is None:
            process.kill()
    assert "Traceback" not in stderr and stderr.strip().splitlines()[-1] == "error: terminated by SIGTERM"
    assert kept.read_text(encoding="utf-8") == "earlier work\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt", "src.de"]


def test_empty_files_are_nothing_to_score(contended: Contended, tmp_path: Path) -> None:
    empty, also = tmp_path / "empty.en", tmp_path / "also-empty.en"
    empty.write_bytes(b"")
    also.write_bytes(b"")
    result = mt("eval", "--hyp", str(empty), "--ref", str(also), cwd=tmp_path)
    assert f"--hyp {empty} and --ref {also} are empty; there is nothing to score" in one_error_line(result, 2)
    result = mt("eval", "--hyp", str(empty), "--hyp", str(also), "--ref", str(also), cwd=tmp_path)
    assert "are empty; there is nothing to score" in one_error_line(result, 2)
    result = mt("eval", "--run", str(contended.run), "--src", str(empty), "--ref", str(also), cwd=tmp_path)
    assert f"--src {empty} and --ref {also} are empty" in one_error_line(result, 2)


def test_a_prepared_corpus_damaged_in_place_is_one_line_naming_the_file(
    contended: Contended, tmp_path: Path
) -> None:
    """Out-of-vocabulary ids, the same sizes: the manifest still adds up, the ids do not."""
    run = RunDir(shutil.copytree(contended.run, tmp_path / "run"))
    (tokens,) = run.prepared.glob("*/tgt.tokens")
    tokens.write_bytes(b"\xff" * tokens.stat().st_size)  # uint16 65535 in a vocabulary of 500
    before = files_in(run.checkpoints)
    result = mt("train", "--run", str(run.root), "--resume", "--set", "train.max_epochs=2", cwd=tmp_path)
    line = one_error_line(result, 2)
    assert f"prepared corpus file {tokens} is damaged (piece id 65535 in a vocabulary of 500)" in line
    assert f"delete {tokens.parent} and rerun `mt prepare`" in line
    assert files_in(run.checkpoints) == before and not run.lock.exists()


def test_a_reader_that_goes_away_during_a_batch_is_exit_141(contended: Contended, tmp_path: Path) -> None:
    """One batch of 300 lines (some 30 kB) into a 4 kB pipe whose reader stops after 100 bytes:
    the write is cut short, which Python's buffered stdout took for success (exit 0)."""
    import fcntl

    source = tmp_path / "src.de"
    lines = read_lines(SHIPPED_MULTI30K / "train.de.gz")[:300]
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    read_end, write_end = os.pipe()
    fcntl.fcntl(read_end, fcntl.F_SETPIPE_SZ, 4096)
    command = ["translate", "--run", str(contended.run), "-i", str(source), "--beam", "1"]
    process = subprocess.Popen(
        [sys.executable, "-m", "mt_cli", *command],
        stdout=write_end,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as reader:
            assert len(reader.read(100)) == 100  # then the reader goes away, as `head -c 100` does
        assert process.wait(timeout=120) == 141
        stderr = process.stderr.read().decode("utf-8")
    finally:
        if process.poll() is None:
            process.kill()
    assert "Traceback" not in stderr and "error" not in stderr  # quiet, as `cat` is


def test_align_with_ctranslate2_is_refused_before_anything_is_exported(
    contended: Contended, tmp_path: Path
) -> None:
    before = files_in(contended.run)
    args = ("Ein Hund.", "--run", str(contended.run), "--engine", "ctranslate2", "--align")
    result = mt("translate", *args, cwd=tmp_path)
    assert "--align needs --engine mt" in one_error_line(result, 2)
    assert files_in(contended.run) == before  # no RUN/exports/ctranslate2-*


@contextmanager
def read_only(path: Path) -> Iterator[list[str]]:
    """A command prefix under which ``path`` is read-only for everyone, root included: a read-only
    bind mount in a user namespace (`unshare`); without one, and not root, the permission bits."""
    try:
        usable = subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0
    except FileNotFoundError:
        usable = False
    if usable:
        yield ["unshare", "-rm", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', str(path)]
        return
    if os.geteuid() == 0:
        pytest.skip("root without user namespaces: nothing can make a directory read-only for it here")
    modes = {p: p.stat().st_mode for p in [path, *path.rglob("*")]}
    for p in modes:
        p.chmod(modes[p] & ~0o222)
    try:
        yield []
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


def test_a_read_only_run_is_refused_before_the_work(contended: Contended, tmp_path: Path) -> None:
    """`mt plot` (default output in the run) and the CTranslate2 export made on first use."""
    run = RunDir(shutil.copytree(contended.run, tmp_path / "run"))
    before = files_in(run.root)
    with read_only(run.root) as prefix:
        result = mt("plot", "--run", str(run.root), cwd=tmp_path, prefix=prefix)
        line = one_error_line(result, 2)
        assert f"--output (default) {run.root}/curves.png: directory {run.root} is not writable" in line
        args = ("Ein Hund.", "--run", str(run.root), "--engine", "ctranslate2")
        result = mt("translate", *args, cwd=tmp_path, prefix=prefix)
        line = one_error_line(result, 2)
        assert f"run directory {run.root} is not writable" in line and "mt export -f ctranslate2" in line
        assert "exporting" not in result.stderr  # refused before the export began
    assert files_in(run.root) == before


def test_messages_say_what_is_wrong_and_what_works(contended: Contended, tmp_path: Path) -> None:
    run = RunDir(contended.run)
    translate = ("translate", "Ein Hund.", "--run", str(run.root))
    result = mt(*translate, "--ensemble", str(run.last), cwd=tmp_path)
    line = one_error_line(result, 2)
    assert f"{run.last} is a checkpoint file, not a run directory" in line
    assert f"give RUN:CHECKPOINT ({run.root}:last)" in line
    # A member whose tokenizers are not its checkpoint's: torch's message ends in a colon.
    other = RunDir(shutil.copytree(run.root, tmp_path / "other", ignore=shutil.ignore_patterns("prepared")))
    shutil.copy(run.root / "spm.en.model", other.root / "spm.de.model")  # 500 pieces, not 600
    line = one_error_line(mt(*translate, "--ensemble", str(other.root), cwd=tmp_path), 2)
    assert "size mismatch for src_embed.weight: checkpoint [600, 64], model [500, 64]" in line
    assert not line.endswith(":")
    # Bytes that are no checkpoint: no advice to load them with weights_only=False.
    for name, data in (("noise.pt", os.urandom(4096)), ("text.pt", b"hello\n")):
        (tmp_path / name).write_bytes(data)
        result = mt(*translate, "--checkpoint", str(tmp_path / name), cwd=tmp_path)
        line = one_error_line(result, 2)
        assert "is damaged or truncated" in line and "weights_only" not in line
    # A corrupt tokenizer in a run with checkpoints, where `mt train` would refuse new ones.
    (other.root / "spm.de.model").write_bytes(b"garbage")
    line = one_error_line(mt("translate", "Ein Hund.", "--run", str(other.root), cwd=tmp_path), 2)
    assert "is corrupt" in line and "restore it from a copy of the run" in line and "mt train" not in line
    # The command line's own mistakes: one `error:` line, as every other mistake.
    for args, message in (
        (("translate", "--beam", "abc"), "Invalid value for '--beam' / '-b'"),
        (("translate", "--no-such-option"), "No such option: --no-such-option"),
        (("transl",), "No such command 'transl'"),
    ):
        line = one_error_line(mt(*args, cwd=tmp_path), 2)
        assert message in line and line.endswith("--help`)"), line


def test_closed_standard_input_or_output_is_one_line(contended: Contended, tmp_path: Path) -> None:
    run = str(contended.run)
    result = mt("translate", "--run", run, cwd=tmp_path, closed=(0,))  # mt translate <&-
    assert "standard input is closed; give the text as an argument or --input FILE" in one_error_line(
        result, 2
    )
    result = mt("score", "--run", run, cwd=tmp_path, closed=(0,))
    assert "standard input is closed" in one_error_line(result, 2)
    result = mt("translate", "Ein Hund.", "--run", run, cwd=tmp_path, closed=(1,))  # >&-
    assert "standard output is closed" in one_error_line(result, 2)
    hypotheses = tmp_path / "hyp.en"
    hypotheses.write_text("A dog.\n", encoding="utf-8")
    result = mt("eval", "--hyp", str(hypotheses), "--ref", str(hypotheses), cwd=tmp_path, closed=(1,))
    assert "standard output is closed; the scores are printed there" in one_error_line(result, 2)
    output = tmp_path / "out.en"  # with --output, standard output is not needed
    result = mt("translate", "Ein Hund.", "--run", run, "-o", str(output), cwd=tmp_path, closed=(1,))
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(read_lines(output)) == 1


@pytest.mark.parametrize("words", [["--resume", "last"], ["auto"]], ids=["another-value", "without-resume"])
def test_resume_takes_auto_or_nothing(tmp_path: Path, words: list[str]) -> None:
    result = mt("train", "--run", str(tmp_path / "run"), *words, cwd=tmp_path)
    line = one_error_line(result, 2)
    assert f"unexpected argument {words[-1]!r}" in line and "--resume auto" in line
    assert not (tmp_path / "run").exists()
