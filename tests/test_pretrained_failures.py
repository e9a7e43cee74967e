"""`mt import` and what it cannot use (issue 49 §1.4): a hub that accepts a connection and never
answers, weights that do not fit their config or hold NaN, a config with a null, huge or textual
size, a corrupt or foreign SentencePiece model, a name with line breaks, a read-only target: each
is one line on stderr with the documented exit code, and no run directory is left behind. The
target is checked before the work."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
from marian_models import PIECES, multi30k, save_marian
from typer.testing import CliRunner

from mt_cli.cli import app
from mt_cli.errors import EXIT_FAILURE, EXIT_USAGE
from mt_cli.pretrained.saved import MAX_MISSING_PIECES

pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")


@pytest.fixture(scope="module")
def marian_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_marian(tmp_path_factory.mktemp("marian") / "opus-mt-random", steps=0)


def _one_error_line(code: int, exit_code: int, stderr: str) -> str:
    assert exit_code == code, (exit_code, stderr[-3000:])
    assert "Traceback" not in stderr and stderr.count("\n") == 1 and stderr.startswith("error: "), stderr
    return stderr


def _import(source: Path, run: Path) -> tuple[int, str]:
    """`mt import SOURCE --run RUN` in this process: (exit code, stderr)."""
    result = CliRunner().invoke(app, ["import", str(source), "--run", str(run)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a traceback: the test fails showing it
    return result.exit_code, result.stderr


def _edit_weights(directory: Path, edit: Callable[[dict[str, torch.Tensor]], None]) -> None:
    weights = safetensors_torch.load_file(directory / "model.safetensors")
    edit(weights)
    safetensors_torch.save_file(weights, directory / "model.safetensors", metadata={"format": "pt"})


def _edit_json(path: Path, **changes: object) -> None:
    path.write_text(json.dumps(json.loads(path.read_text(encoding="utf-8")) | changes), encoding="utf-8")


def _czech_sentencepiece(path: Path) -> None:
    """A SentencePiece model of another language, the size of the model's own."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(multi30k("train", "cs")[:6000]), model_writer=model, vocab_size=PIECES,
        model_type="unigram", character_coverage=1.0, num_threads=1, minloglevel=2,
    )  # fmt: skip
    path.write_bytes(model.getvalue())


FC1 = "model.encoder.layers.0.fc1.weight"

BROKEN: dict[str, tuple[Callable[[Path], None], str]] = {
    "a tensor of the wrong shape": (
        lambda d: _edit_weights(d, lambda w: w.update({FC1: torch.zeros(128, 65)})),
        f"{FC1} is [128, 65] where config.json's sizes make it [128, 64]",
    ),
    "a tensor too narrow to index": (
        lambda d: _edit_weights(d, lambda w: w.update({FC1: torch.zeros(128, 63)})),
        f"{FC1} is [128, 63]",
    ),
    "NaN weights": (
        lambda d: _edit_weights(d, lambda w: w[FC1].__setitem__((0, 0), float("nan"))),
        f"{FC1} holds 1 NaN or infinite values",
    ),
    "integer weights": (
        lambda d: _edit_weights(d, lambda w: w.update({FC1: w[FC1].to(torch.int8)})),
        f"{FC1} holds int8 values",
    ),
    "a name with line breaks": (
        lambda d: _edit_weights(d, lambda w: w.update({"model.extra\nweight\nthird": torch.zeros(1)})),
        "'model.extra\\nweight\\nthird', which mt's model has no place for",
    ),
    "d_model null": (lambda d: _edit_json(d / "config.json", d_model=None), "config.json's d_model: null"),
    "d_model huge": (
        lambda d: _edit_json(d / "config.json", d_model=2**40),
        "64] where config.json's sizes make it [",
    ),
    "a billion layers": (
        lambda d: _edit_json(d / "config.json", encoder_layers=10**9),
        "config.json's encoder_layers is 1000000000 but the Marian weights hold 2 encoder layers",
    ),
    "dropout as text": (
        lambda d: _edit_json(d / "config.json", dropout="high"),
        'config.json\'s dropout: "high"',
    ),
    "scale_embedding as text": (
        lambda d: _edit_json(d / "config.json", scale_embedding="false"),
        'scale_embedding: "false" (true or false is needed)',
    ),
    "num_beams as text": (
        lambda d: _edit_json(d / "generation_config.json", num_beams="many"),
        'generation_config.json\'s num_beams: "many"',
    ),
    "a corrupt target.spm": (
        lambda d: (d / "target.spm").write_bytes(b"not a model\n" * 50),
        "target.spm is corrupt",
    ),
    "a foreign source.spm": (
        lambda d: _czech_sentencepiece(d / "source.spm"),
        f"more than {MAX_MISSING_PIECES:.0%}; it is another model's",
    ),
    "an empty pytorch_model.bin": (
        lambda d: ((d / "model.safetensors").unlink(), (d / "pytorch_model.bin").write_bytes(b"")),
        "pytorch_model.bin is not a readable weights file (EOFError)",
    ),
    "a tensor for a state dict": (
        lambda d: ((d / "model.safetensors").unlink(), torch.save(torch.zeros(3), d / "pytorch_model.bin")),
        "holds a Tensor that is not a state dict",
    ),
}


@pytest.mark.parametrize("how", BROKEN)
def test_a_bad_checkpoint_is_one_line_exit_2_and_no_run(marian_dir: Path, tmp_path: Path, how: str) -> None:
    source = shutil.copytree(marian_dir, tmp_path / "broken")
    damage, message = BROKEN[how]
    damage(source)
    code, stderr = _import(source, tmp_path / "run")
    assert message in _one_error_line(EXIT_USAGE, code, stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken"]


def test_the_intact_copy_imports(marian_dir: Path, tmp_path: Path) -> None:
    """The premise of the test above: each fault, not the copy, is what is refused."""
    code, stderr = _import(shutil.copytree(marian_dir, tmp_path / "intact"), tmp_path / "run")
    assert code == 0 and (tmp_path / "run" / "checkpoints" / "best.pt").is_file(), stderr


@pytest.fixture
def silent_hub() -> Iterator[str]:
    """A server that accepts connections and never answers: the URL to point HF_ENDPOINT at."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:  # closed: the test is over
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for connection in held:
            connection.close()


def test_a_hub_that_never_answers_is_one_line_exit_3_within_the_timeout(
    silent_hub: str, tmp_path: Path
) -> None:
    env = os.environ | {
        "HF_ENDPOINT": silent_hub,
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_ETAG_TIMEOUT": "1",
        "HF_HUB_DOWNLOAD_TIMEOUT": "1",
    }
    env.pop("HF_HUB_OFFLINE", None)
    command = [
        sys.executable,
        "-m",
        "mt_cli",
        "import",
        "hf:Helsinki-NLP/opus-mt-de-en",
        "--run",
        str(tmp_path / "run"),
    ]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    line = _one_error_line(EXIT_FAILURE, result.returncode, result.stderr)
    assert "hub is unreachable" in line and "not in the local cache" in line
    assert not (tmp_path / "run").exists()  # and within the subprocess's 120 s: no hang


COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _hub_handler(model: Path) -> type[BaseHTTPRequestHandler]:
    """The part of the hub's API an import uses, serving ``model`` at COMMIT: the model's info
    (its commit and files) and each file (HEAD for its metadata, GET for its bytes)."""

    class Hub(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

        def _answer(self, body: bool) -> None:
            if self.path.startswith("/api/models/"):
                data = json.dumps(
                    {
                        "id": "Owner/opus-mt-random",
                        "sha": COMMIT,
                        "siblings": [{"rfilename": p.name} for p in model.iterdir()],
                    }
                )
                return self._send(data.encode(), body, {"Content-Type": "application/json"})
            name = self.path.partition(f"/resolve/{COMMIT}/")[2]
            if not name or not (model / name).is_file():
                return self._send(b"", body, {"X-Error-Code": "EntryNotFound"}, status=404)
            data = (model / name).read_bytes()
            self._send(data, body, {"X-Repo-Commit": COMMIT, "ETag": f'"{hashlib.sha256(data).hexdigest()}"'})

        def _send(self, data: bytes, body: bool, headers: dict[str, str], status: int = 200) -> None:
            self.send_response(status)
            for key, value in (headers | {"Content-Length": str(len(data))}).items():
                self.send_header(key, value)
            self.end_headers()
            if body:
                self.wfile.write(data)

    return Hub


def test_a_hub_that_answers_gives_the_import_its_files_and_commit(marian_dir: Path, tmp_path: Path) -> None:
    """The premise of the test above: the time limits let an answering hub serve the import, and
    only the files an import reads are fetched."""
    model = shutil.copytree(marian_dir, tmp_path / "model")
    (model / "tf_model.h5").write_bytes(b"TensorFlow weights mt never reads")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _hub_handler(model))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = os.environ | {
        "HF_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
        "HF_HOME": str(tmp_path / "hf"),
    }
    env.pop("HF_HUB_OFFLINE", None)
    try:
        command = [
            sys.executable,
            "-m",
            "mt_cli",
            "import",
            "hf:Owner/opus-mt-random",
            "--run",
            str(tmp_path / "run"),
        ]
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    assert f"imported hf:Owner/opus-mt-random@{COMMIT}" in result.stderr
    snapshot = tmp_path / "hf" / "hub" / "models--Owner--opus-mt-random" / "snapshots" / COMMIT
    assert sorted(p.name for p in snapshot.iterdir()) == sorted(p.name for p in marian_dir.iterdir())


def _read_only_prefix(path: Path) -> list[str]:
    """A command prefix under which ``path`` is a read-only mount, for root too (a user namespace)."""
    try:
        usable = subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0
    except FileNotFoundError:
        usable = False
    if not usable:
        pytest.skip("no user namespaces (unshare -rm) to make a directory read-only in")
    return ["unshare", "-rm", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', str(path)]


def test_a_read_only_target_is_exit_2_before_the_work(marian_dir: Path, tmp_path: Path) -> None:
    """The weights are missing too, and the import never reads that far: the target is checked first."""
    source = shutil.copytree(marian_dir, tmp_path / "source")
    (source / "model.safetensors").unlink()
    target = tmp_path / "target"
    target.mkdir()
    command = [sys.executable, "-m", "mt_cli", "import", str(source), "--run", str(target / "run")]
    result = subprocess.run(_read_only_prefix(target) + command, capture_output=True, text=True, timeout=300)
    line = _one_error_line(EXIT_USAGE, result.returncode, result.stderr)
    assert f"--run {target / 'run'}: directory {target} is not writable" in line
    assert list(target.iterdir()) == []
