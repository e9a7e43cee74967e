"""The commands as a user types them: real `mt` processes on a run trained by `mt train` itself.

Every command runs in a fresh working directory (nothing may depend on where it starts), reads
what a user would give it, and is judged on what it prints, the files it leaves and its exit
code. Bad input must give one line on stderr, a documented exit code, and lose nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sacrebleu
import typer
import yaml
from typer.testing import CliRunner

from mt_cli.cli import app
from mt_cli.cli.engines import ModelChoice
from mt_cli.config.recipe import load_config
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import recipe_names
from mt_cli.serve.settings import Settings
from mt_cli.version import __version__

COMMANDS = ["prepare", "train", "config", "translate", "eval", "average", "bench", "plot"]
TINY = ["--config", "tiny", "--set", "data.train_limit=800", "--set", "train.max_tokens=1024"]
# An undertrained model rarely stops by itself: outputs capped at 0.5 * source length + 5 pieces.
CAPPED = ["--set", "decode.max_len_a=0.5", "--set", "decode.max_len_b=5"]
SENTENCES = [
    "Ein Mann fährt Fahrrad.",
    "",
    "🐶🎉 Ein Hund ✨",
    " ".join(["Hund"] * 5000),
    "Zwei Kinder spielen.",
]


def mt(
    *args: str, cwd: Path, stdin: str | bytes | None = None, timeout: int = 300
) -> subprocess.CompletedProcess:
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    result = subprocess.run(
        [sys.executable, "-m", "mt_cli", *args],
        input=data,
        capture_output=True,
        cwd=cwd,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    result.stdout, result.stderr = result.stdout.decode("utf-8"), result.stderr.decode("utf-8")
    return result


def one_error_line(result: subprocess.CompletedProcess, code: int = 2) -> str:
    assert result.returncode == code, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("anywhere")


@pytest.fixture(scope="module")
def cli_run(workdir: Path) -> tuple[Path, subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """`mt train` for one epoch, then `mt train --resume` for a second: (run, first, resumed)."""
    run = workdir / "runs" / "tiny"
    first = mt("train", *TINY, *CAPPED, "--set", "train.max_epochs=1", "--run", str(run), cwd=workdir)
    assert first.returncode == 0, first.stderr[-3000:]
    resumed = mt("train", "--run", str(run), "--resume", "--set", "train.max_epochs=2", cwd=workdir)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return run, first, resumed


def test_help_and_version() -> None:
    runner = CliRunner()
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout.strip() == f"mt {__version__}"
    for command in COMMANDS:
        for flag in ("-h", "--help"):
            result = runner.invoke(app, [command, flag])
            assert (
                result.exit_code == 0
                and "Usage: " in result.stdout
                and f" {command} [OPTIONS]" in result.stdout
            )
    assert "--install-completion" in runner.invoke(app, ["--help"]).stdout


def test_every_command_that_opens_a_model_takes_the_same_options() -> None:
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    shapes = {}
    for name in ("translate", "eval", "score", "serve"):
        params = {param.name: param for param in commands[name].params}
        shapes[name] = [
            (params[field.name].opts, params[field.name].help, params[field.name].default)
            for field in dataclasses.fields(ModelChoice)
        ]
    assert len(shapes["translate"]) == 7 and all(shape == shapes["translate"] for shape in shapes.values())


def test_serve_takes_its_defaults_from_the_settings() -> None:
    serve = typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]
    params = {param.name: param for param in serve.params}
    settings = Settings()
    # All but options (--beam and --length-penalty) and api_keys (a file).
    fields = [field.name for field in dataclasses.fields(Settings) if field.name in params]
    fields.remove("api_keys")
    assert len(fields) == 18
    assert all(params[name].default == getattr(settings, name) for name in fields)
    assert (params["beam"].default, params["length_penalty"].default) == (None, None)


@pytest.mark.parametrize("command", [["translate", "x"], ["eval"], ["serve", "--port", "0"]])
def test_beam_and_length_penalty_are_checked_by_the_option_rules(command: list[str]) -> None:
    runner = CliRunner()
    for option, value, message in (
        ("--beam", "0", "error: beam size 0 must be at least 1 (1 is greedy search)"),
        ("--length-penalty", "-1", "error: length penalty -1.0 must be a number >= 0 (0 turns it off)"),
    ):
        result = runner.invoke(app, [*command, "--run", "no-such-run", option, value])
        assert result.exit_code == 2 and result.stderr.strip() == message, result.stderr


def test_config_prints_the_resolved_recipe_from_any_directory(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    result = runner.invoke(
        app, ["config", "--config", "tiny", "--set", "model.d_model=32", "-s", "train.lr=1e-3"]
    )
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(result.stdout)
    assert printed["model"]["d_model"] == 32 and printed["train"]["lr"] == 0.001
    assert printed["data"]["train_limit"] == load_config("tiny").data.train_limit
    shipped = Path(__file__).resolve().parent.parent / "configs" / "multi30k.yaml"
    assert yaml.safe_load(runner.invoke(app, ["config"]).stdout) == yaml.safe_load(
        runner.invoke(app, ["config", "--config", str(shipped)]).stdout
    )
    unknown = runner.invoke(app, ["config", "--config", "multi31k"])
    assert unknown.exit_code == 2 and f"({', '.join(recipe_names())})" in unknown.stderr
    assert {"multi30k", "multi30k-en-de", "quick", "tiny"} <= set(recipe_names())
    typo = runner.invoke(app, ["config", "--set", "model.d_modle=32"])
    assert typo.exit_code == 2 and "did you mean model.d_model" in typo.stderr


def test_train_prints_results_on_stdout_and_logs_to_stderr_and_train_log(cli_run) -> None:
    run, first, resumed = cli_run
    assert first.stdout.startswith("test2016 (") and "scores and signatures:" in first.stdout
    report = json.loads((run / "test.json").read_text(encoding="utf-8"))
    greedy = next(line for line in resumed.stdout.splitlines() if line.startswith("greedy"))
    assert float(greedy.split()[1]) == pytest.approx(report["scores"]["greedy"]["bleu"], abs=0.005)
    assert "epoch 1 |" in first.stderr and "epoch" not in first.stdout
    log = (run / "train.log").read_text(encoding="utf-8")
    assert "epoch 1 |" in log and "epoch 2 |" in log and "resumed from" in log
    assert report["epochs"] == 2 and report["updates"] > 0


def test_translate_a_file_and_a_pipe(cli_run, workdir: Path) -> None:
    run = cli_run[0]
    source, output = workdir / "in.de", workdir / "out.en"
    source.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    result = mt(
        "translate", "--run", str(run), "-i", str(source), "-o", str(output), "--beam", "2", cwd=workdir
    )
    assert result.returncode == 0, result.stderr
    lines = read_lines(output)
    assert len(lines) == len(SENTENCES) and lines[1] == "" and all(lines[i] for i in (0, 2, 3, 4))
    assert "line 4:" in result.stderr  # the 5,000-word line is cut, with a warning naming it
    piped = mt("translate", "--run", str(run), "--beam", "2", cwd=workdir, stdin=source.read_bytes())
    assert piped.returncode == 0 and piped.stdout.splitlines() == lines


def test_translate_streams_each_line_before_the_input_ends(cli_run, workdir: Path, spawn) -> None:
    proc = spawn(
        [sys.executable, "-m", "mt_cli", "translate", "--run", str(cli_run[0]), "--buffer-size", "1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=workdir,
    )
    try:
        for sentence in ("Ein Hund läuft.", "", "Eine Frau singt."):
            proc.stdin.write((sentence + "\n").encode("utf-8"))
            proc.stdin.flush()
            answer = proc.stdout.readline().decode("utf-8")  # blocks unless the line was translated at once
            assert answer.endswith("\n") and (answer == "\n") == (sentence == "")
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert proc.returncode == 0


def test_translate_checks_the_run_before_reading_stdin(workdir: Path) -> None:
    # stdin stays open: a command that read it first would hang here until the timeout.
    proc = subprocess.Popen(
        [sys.executable, "-m", "mt_cli", "translate", "--run", str(workdir / "none")],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=workdir,
    )
    try:
        assert proc.wait(timeout=60) == 2
        assert "does not exist" in proc.stderr.read().decode("utf-8")
    finally:
        proc.kill()
        proc.stdin.close()


def test_eval_scores_a_run_and_a_file_of_translations(cli_run, workdir: Path, data_dir: Path) -> None:
    run = cli_run[0]
    hyps = workdir / "val.hyp.en"
    result = mt("eval", "--run", str(run), "--split", "val", "--beam", "1", "-o", str(hyps), cwd=workdir)
    assert result.returncode == 0, result.stderr
    refs = read_lines(data_dir / "val.en.gz")
    hyp_lines = read_lines(hyps)
    bleu = sacrebleu.corpus_bleu(hyp_lines, [refs]).score
    chrf = sacrebleu.corpus_chrf(hyp_lines, [refs]).score
    assert f"BLEU = {bleu:.2f}  (nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in result.stdout
    assert f"chrF = {chrf:.2f}" in result.stdout and bleu > 0
    refs_file = workdir / "val.ref.en"
    refs_file.write_text("\n".join(refs) + "\n", encoding="utf-8")
    scored = mt("eval", "--hyp", str(hyps), "--ref", str(refs_file), "--json", cwd=workdir)
    assert scored.returncode == 0, scored.stderr
    assert json.loads(scored.stdout)["bleu"] == pytest.approx(bleu, abs=1e-9)
    short = workdir / "short.en"
    short.write_text("one line\n", encoding="utf-8")
    assert "must pair up" in one_error_line(
        mt("eval", "--hyp", str(short), "--ref", str(refs_file), cwd=workdir)
    )


def test_average_then_translate_with_it(cli_run, workdir: Path) -> None:
    run = cli_run[0]
    result = mt("average", "--run", str(run), "--last", "2", cwd=workdir)
    assert result.returncode == 0 and "averaged 2 checkpoints" in result.stdout, result.stderr
    assert mt(
        "translate", "Ein Hund.", "--run", str(run), "--checkpoint", "average", cwd=workdir
    ).stdout.strip()
    assert "does not exist" in one_error_line(mt("average", "--run", str(workdir / "nothing"), cwd=workdir))
    wrong = one_error_line(mt("translate", "x", "--run", str(run), "--checkpoint", "bset", cwd=workdir))
    assert "average, best, last" in wrong


def test_outputs_are_checked_before_decoding_and_nothing_is_lost(
    cli_run, workdir: Path, tmp_path: Path
) -> None:
    def translate_error(*args: str) -> str:
        return one_error_line(mt("translate", "--run", str(cli_run[0]), *args, cwd=workdir))

    source = tmp_path / "in.de"
    source.write_bytes("Ein Mann.\nEin Hund.\nGr\xfc\xdfe\n".encode("latin-1"))
    assert "does not exist" in translate_error("-i", str(source), "-o", str(tmp_path / "no" / "out.en"))
    assert not (tmp_path / "no").exists()
    assert "is a directory" in translate_error("-i", str(source), "-o", str(tmp_path))
    assert "is a directory" in translate_error("-i", str(tmp_path))
    assert "is the --input" in translate_error("-i", str(source), "-o", str(source))
    kept = tmp_path / "out.en"
    kept.write_text("earlier work\n", encoding="utf-8")
    bad = translate_error("-i", str(source), "-o", str(kept), "--buffer-size", "1")
    assert "not UTF-8 (line 3)" in bad
    assert kept.read_text(encoding="utf-8") == "earlier work\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.de", "out.en"]  # no temporary file left behind


def test_ctrl_c_while_translating_keeps_the_old_output(cli_run, workdir: Path, tmp_path: Path, spawn) -> None:
    kept = tmp_path / "out.en"
    kept.write_text("earlier work\n", encoding="utf-8")
    proc = spawn(
        [
            sys.executable,
            "-m",
            "mt_cli",
            "translate",
            "--run",
            str(cli_run[0]),
            "-o",
            str(kept),
            "--buffer-size",
            "1",
        ],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=workdir,
    )
    proc.stdin.write(b"Ein Hund.\n")
    proc.stdin.flush()
    deadline = time.time() + 120  # the temporary output appears once the run is loaded and reading began
    while time.time() < deadline and len(list(tmp_path.iterdir())) < 2:
        time.sleep(0.1)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert proc.stderr.read().decode("utf-8").strip().splitlines()[-1] == "error: interrupted"
    assert kept.read_text(encoding="utf-8") == "earlier work\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.en"]


def test_prepare_refuses_to_change_a_trained_runs_tokenizers(cli_run, workdir: Path) -> None:
    run = cli_run[0]
    before = {name: (run / name).read_bytes() for name in ("spm.de.model", "spm.en.model")}
    result = mt("prepare", *TINY, "--run", str(run), "--set", "tokenizer.src_vocab_size=300", cwd=workdir)
    assert "tokenizer would change" in one_error_line(result)
    assert {name: (run / name).read_bytes() for name in before} == before
    same = mt("prepare", *TINY, "--run", str(run), cwd=workdir)
    assert same.returncode == 0 and "de train: vocab" in same.stdout and "reusing" in same.stderr


def test_failed_commands_leave_no_run_directory(workdir: Path, tmp_path: Path) -> None:
    run = tmp_path / "new-run"
    assert "Multi30k not found" in one_error_line(
        mt("train", *TINY, "--run", str(run), "--set", f"data.dir={tmp_path / 'nowhere'}", cwd=workdir)
    )
    assert "is a directory" in one_error_line(
        mt("train", "--config", str(tmp_path), "--run", str(run), cwd=workdir)
    )
    assert "Multi30k not found" in one_error_line(
        mt("prepare", *TINY, "--run", str(run), "--set", f"data.dir={tmp_path / 'nowhere'}", cwd=workdir)
    )
    assert not run.exists()


def test_a_diverging_run_exits_3_with_one_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("mt_cli.train.trainer.token_loss", lambda logits, *rest: logits.sum() * float("nan"))
    args = ["train", *TINY, "--set", "train.max_bad_steps=2", "--run", str(tmp_path / "run")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 3, result.output
    assert (
        result.stderr.strip().splitlines()[-1].startswith("error: the gradient was not finite for 2 updates")
    )
