"""`--output` as a shell's `>`: into /dev/null, /dev/stdout and a FIFO in place, through a link
into its target; the real commands (translate, eval, plot), each in its own process."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

from mt_cli.disk.files import written_in_place

LINES = "Ein Hund läuft.\nZwei Kinder spielen.\n"


def mt(*args: str, stdin: str = "") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "mt_cli", *args],
        input=stdin.encode("utf-8"),
        capture_output=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def translated(run: Path) -> bytes:
    result = mt("translate", "--run", str(run), stdin=LINES)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert len(result.stdout.decode().splitlines()) == 2
    return result.stdout


def test_translate_into_dev_null_leaves_it_a_device(trained_run: Path) -> None:
    # Checked before the command runs: a regression must not turn this machine's /dev/null into a file.
    assert written_in_place(Path("/dev/null"))
    result = mt("translate", "--run", str(trained_run), "-o", "/dev/null", stdin=LINES)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert result.stdout == b""


def test_translate_and_plot_into_dev_stdout_reach_the_pipe(trained_run: Path) -> None:
    result = mt("translate", "--run", str(trained_run), "-o", "/dev/stdout", stdin=LINES)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert result.stdout == translated(trained_run)
    plot = mt("plot", "--run", str(trained_run), "-o", "/dev/stdout")
    assert plot.returncode == 0, plot.stderr.decode()[-2000:]
    assert plot.stdout.startswith(b"\x89PNG\r\n\x1a\n")


def test_eval_hypotheses_into_a_fifo_reach_its_reader(trained_run: Path, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    src, ref = tmp_path / "in" / "src.de", tmp_path / "in" / "ref.en"
    src.write_text(LINES, encoding="utf-8")
    ref.write_text("A dog runs.\nTwo children play.\n", encoding="utf-8")
    fifo = tmp_path / "hypotheses"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as handle:
            received.append(handle.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    result = mt("eval", "--run", str(trained_run), "--src", str(src), "--ref", str(ref), "-o", str(fifo))
    reader.join(timeout=60)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert received and received[0] == translated(trained_run)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hypotheses", "in"]


def test_translate_through_a_link_replaces_its_target_and_keeps_the_link(
    trained_run: Path, tmp_path: Path
) -> None:
    (tmp_path / "outputs").mkdir()
    target = tmp_path / "outputs" / "today.en"
    target.write_text("yesterday\n", encoding="utf-8")
    link = tmp_path / "latest.en"
    link.symlink_to(target)
    result = mt("translate", "--run", str(trained_run), "-o", str(link), stdin=LINES)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == translated(trained_run)
