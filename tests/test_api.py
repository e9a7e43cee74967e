"""The Python API: every example of docs/api.md runs, ``mt_cli.load(run).translate(lines)`` is
``mt translate`` line for line in both engines, the public names load lazily, bad calls are
mt's own one-line errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import mt_cli
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.errors import InputError

DOCS = Path(__file__).resolve().parent.parent / "docs" / "api.md"
DOCS_RUN = "runs/multi30k"  # the run directory the examples name; the test gives them its own


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.DOTALL)


def test_the_documented_examples_run(trained_run: Path, capsys: pytest.CaptureFixture) -> None:
    blocks = python_blocks(DOCS.read_text(encoding="utf-8"))
    assert len(blocks) >= 7
    namespace: dict = {}
    for number, block in enumerate(blocks, 1):
        assert DOCS_RUN in block or "model" in block
        code = compile(block.replace(DOCS_RUN, str(trained_run)), f"docs/api.md example {number}", "exec")
        exec(code, namespace)  # one namespace: later examples use the model of earlier ones
    printed = capsys.readouterr().out
    assert "de -> en" in printed and "InputError" not in printed
    assert "2 sampling draws one translation per line" in printed


def test_every_public_name_is_documented_and_loads_without_torch_until_used() -> None:
    documented = DOCS.read_text(encoding="utf-8")
    for name in mt_cli.__all__[1:]:
        assert f"`{name}" in documented, name
    code = (
        "import sys, mt_cli\n"
        "assert 'torch' not in sys.modules, 'import mt_cli loaded torch'\n"
        "names = [getattr(mt_cli, n) for n in mt_cli.__all__]\n"
        "assert 'torch' not in sys.modules, 'a public type loaded torch'\n"  # a model loads it
        "print(len(names))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(len(mt_cli.__all__))
    with pytest.raises(AttributeError):
        _ = mt_cli.no_such_name


@pytest.fixture(scope="module")
def lines() -> list[str]:
    source = read_lines(SHIPPED_MULTI30K / "test_2016_flickr.de.gz")[:40]
    return [*source[:20], "", "  ", *source[20:], "Hund " * 100]  # empty lines, a line past the positions


@pytest.mark.parametrize("engine", ["mt", "ctranslate2"])
def test_load_translate_equals_mt_translate(trained_run: Path, tmp_path: Path, lines: list[str], engine: str):
    source = tmp_path / "in.de"
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    command = [sys.executable, "-m", "mt_cli", "translate", "--run", str(trained_run), "--engine", engine]
    done = subprocess.run([*command, "-i", str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    cut: list[str] = []
    translations = mt_cli.load(trained_run, engine=engine, warn=cut.append).translate(lines)
    assert [t.text for t in translations] == done.stdout.splitlines()
    assert [t.source for t in translations] == lines
    assert cut == _warnings(done.stderr) and len(cut) == 1 and cut[0].startswith("line 43:")


def _warnings(stderr: str) -> list[str]:
    return [line.removeprefix("warning: ") for line in stderr.splitlines() if line.startswith("warning: ")]


def test_bad_calls_are_input_errors(trained_run: Path) -> None:
    model = mt_cli.load(trained_run, compute_type="float32")
    with pytest.raises(InputError, match="list of lines, not one string"):
        model.translate("Ein Hund.")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="cannot exceed the beam size 2"):
        model.translate(["Ein Hund."], beam=2, n_best=3)
    with pytest.raises(
        InputError, match="unknown translation option 'beam_size'; the options are beam, n_best"
    ):
        model.translate(["Ein Hund."], beam_size=2)
    with pytest.raises(InputError, match="options must be a TranslateOptions, not int"):
        model.translate(["Ein Hund."], 4)  # type: ignore[arg-type]  # the old positional beam
    widest = model.engine.tgt_tok.vocab_size // 2  # type: ignore[attr-defined]
    with pytest.raises(InputError, match=f"allows a beam of at most {widest}$"):
        model.options(beam=widest + 1)
    with pytest.raises(InputError, match="2 sources but 1 targets"):
        model.score(["a", "b"], ["c"])
    with pytest.raises(InputError, match="decoder layer 7 does not exist"):
        model.align(["Ein Hund."], ["A dog."], layer=7)
    with pytest.raises(InputError, match="engine 'marian' is not one of mt, ctranslate2"):
        mt_cli.load(trained_run, engine="marian")
    with pytest.raises(InputError, match="compute type 'fp8' is not one of"):
        mt_cli.load(trained_run, compute_type="fp8")
    with pytest.raises(InputError, match="2 ensemble weights for 1 models"):
        mt_cli.load(trained_run, weights=[1.0, 2.0])
    with pytest.raises(InputError, match="positive"):
        mt_cli.load(trained_run, ensemble=[trained_run], weights=[1.0, -1.0])
    assert InputError("x").exit_code == 2


def test_documents_are_translated_sentence_by_sentence_and_put_back(trained_run: Path) -> None:
    import html

    model = mt_cli.load(trained_run, device="cpu", compute_type="float32")
    sentences = ["Ein Hund läuft.", "Zwei Männer spielen Fußball.", "Eine Frau liest ein Buch."]
    lines = [translation.text for translation in model.translate(sentences)]  # one batch, as below
    text = f"{sentences[0]} {sentences[1]}\r\n\n\t{sentences[2]}  "
    assert model.translate_document(text) == f"{lines[0]} {lines[1]}\r\n\n\t{lines[2]}  "
    page = f'<p title="T&amp;T">{sentences[0]} <b>{sentences[1]}</b></p>\n<ul><li>{sentences[2]}</li></ul>'
    assert model.translate_document(page, "html") == (
        f'<p title="T&amp;T">{html.escape(lines[0], False)} <b>{html.escape(lines[1], False)}</b></p>\n'
        f"<ul><li>{html.escape(lines[2], False)}</li></ul>"
    )
    assert model.translate_documents([sentences[0], "", "42"], "text") == [lines[0], "", "42"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.translate_documents("Ein Hund."), "documents must be a list of texts"),
        (lambda m: m.translate_document("Ein Hund.", "md"), "format 'md' is not one of text, html"),
        (lambda m: m.translate_document("Ein Hund.", n_best=2, beam=2), "n_best and align are for translate"),
        (lambda m: m.translate_document("Ein Hund.", align=True), "n_best and align are for translate"),
        (lambda m: m.translate_document("Ein Hund.", tgt_lang="fr"), "fr"),
    ],
)
def test_a_document_call_that_cannot_work_is_an_input_error(trained_run: Path, call, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        call(mt_cli.load(trained_run, device="cpu"))


def test_an_export_directory_needs_the_ctranslate2_engine(trained_run: Path) -> None:
    from mt_cli.export.runs import ctranslate2_model_dir

    export = ctranslate2_model_dir(trained_run, None)
    with pytest.raises(InputError, match="is a CTranslate2 export; open it with --engine ctranslate2"):
        mt_cli.load(export)
    ct2 = mt_cli.load(export, engine="ctranslate2", compute_type="float32")
    assert ct2.origin == str(export) and ct2.src_lang == "de"


def test_a_precision_the_device_cannot_run_is_refused_before_loading(tmp_path: Path) -> None:
    # Nothing is read: the run does not even exist, and the refusal is still about the precision.
    with pytest.raises(InputError, match="compute type float16 needs a CUDA GPU"):
        mt_cli.load(tmp_path / "no-run", device="cpu", compute_type="float16")
