"""Translator and the translate/eval/average commands on a run trained by `mt train`."""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from marian_models import multi30k
from typer.testing import CliRunner

from mt_cli.cli import app
from mt_cli.config.options import TranslateOptions
from mt_cli.data.batch import pad_sources
from mt_cli.decode.translator import Translator
from mt_cli.runtime.precision import ComputeType
from mt_cli.trained import load_trained

runner = CliRunner()


def invoke(*args: str, stdin: str | bytes | None = None):
    return runner.invoke(app, list(args), input=stdin)


def eval_files(run: Path, src: Path, ref: Path, *options: str):
    """`mt eval` of a source file against its references."""
    return invoke("eval", "--run", str(run), "--src", str(src), "--ref", str(ref), *options)


def one_error_line(result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def fp32(trained_run: Path) -> Translator:
    return Translator.of(load_trained(trained_run), compute_type=ComputeType.FLOAT32)


SENTENCES = [
    "Ein Mann fährt Fahrrad.",
    "Zwei Hunde spielen im Schnee auf einer großen Wiese neben einem Haus.",
    "Ein Kind.",
    "Eine Frau in einem roten Kleid singt auf einer Bühne.",
    "Hunde.",
]


def test_output_order_equals_input_order(fp32: Translator) -> None:
    together = fp32.translate_lines(SENTENCES, TranslateOptions(beam=1))
    alone = [fp32.translate_lines([s], TranslateOptions(beam=1))[0] for s in SENTENCES]
    assert together == alone
    assert len(set(together)) > 1


def test_empty_long_and_unseen_lines(fp32: Translator) -> None:
    warnings: list[str] = []
    long_line = " ".join(["Hund"] * 5000)
    lines = ["", SENTENCES[0], long_line, "🐶🎉 Ein Hund ✨", "   "]
    out = fp32.translate_lines(lines, TranslateOptions(beam=2), warn=warnings.append)
    assert len(out) == len(lines)
    assert out[0] == "" and out[4] == ""
    assert out[1] == fp32.translate_lines([SENTENCES[0]], TranslateOptions(beam=2))[0]
    assert len(warnings) == 1 and warnings[0].startswith("line 3:")


def test_bf16_decoding_is_close_to_fp32(trained_run: Path) -> None:
    # CPU autocast is what this checks, also on a machine with a GPU (where "auto" would pick CUDA).
    fp32 = Translator.of(load_trained(trained_run), device="cpu", compute_type=ComputeType.FLOAT32)
    # Built directly: bfloat16 is refused on CPUs without native bf16, the numbers are the same.
    bf16 = Translator.for_inference(
        copy.deepcopy(fp32.model),
        fp32.src_tok,
        fp32.tgt_tok,
        fp32.card,
        torch.device("cpu"),
        torch.bfloat16,
    )
    src, src_mask = pad_sources(fp32.encode_sources(SENTENCES, warn=print))

    def first_step_log_probs(model: torch.nn.Module) -> torch.Tensor:
        bos = torch.full((len(SENTENCES), 1), 2)
        causal = torch.ones(len(SENTENCES), 1, 1, 1, dtype=torch.bool)
        return model.decode(bos, model.encode(src, src_mask), src_mask, causal).float().log_softmax(-1)

    with torch.no_grad():
        exact = first_step_log_probs(fp32.model)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            approx = first_step_log_probs(bf16.model)
    assert (exact - approx).abs().max() < 0.25
    assert (exact.argmax(-1) == approx.argmax(-1)).float().mean() >= 0.8


def test_translate_argument_stdin_and_files(trained_run: Path, tmp_path: Path, fp32: Translator) -> None:
    result = invoke("translate", SENTENCES[0], "--run", str(trained_run), "--beam", "1")
    assert result.exit_code == 0, result.output
    default = Translator.of(load_trained(trained_run))  # the precision `mt translate` picks
    assert result.stdout.strip() == default.translate_lines([SENTENCES[0]], TranslateOptions(beam=1))[0]
    piped = invoke("translate", "--run", str(trained_run), stdin="\n".join(SENTENCES) + "\n")
    assert piped.exit_code == 0 and len(piped.stdout.splitlines()) == len(SENTENCES)
    source = tmp_path / "in.de"
    source.write_text("\n".join(["", *SENTENCES, ""]) + "\n", encoding="utf-8")
    written = tmp_path / "out.en"
    result = invoke("translate", "--run", str(trained_run), "--input", str(source), "--output", str(written))
    assert result.exit_code == 0
    lines = written.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(SENTENCES) + 2 and lines[0] == "" and lines[-1] == ""
    assert lines[1:-1] == piped.stdout.splitlines()


def test_n_best_output(trained_run: Path) -> None:
    result = invoke("translate", SENTENCES[0], "--run", str(trained_run), "--beam", "3", "--n-best", "3")
    rows = [line.split(" ||| ") for line in result.stdout.splitlines()]
    assert len(rows) == 3 and all(r[0] == "0" for r in rows)
    scores = [float(r[2]) for r in rows]
    assert scores == sorted(scores, reverse=True)


def test_length_penalty_option(trained_run: Path, tmp_path: Path) -> None:
    scores = {}
    for alpha in ("0", "2"):
        result = invoke(
            "translate",
            SENTENCES[1],
            "--run",
            str(trained_run),
            "--beam",
            "3",
            "--n-best",
            "3",
            "--length-penalty",
            alpha,
        )
        assert result.exit_code == 0, result.output
        scores[alpha] = {
            row.split(" ||| ")[1]: float(row.split(" ||| ")[2]) for row in result.stdout.splitlines()
        }
    shared = scores["0"].keys() & scores["2"].keys()
    assert shared
    for text in shared:
        # alpha 0 prints the log-probability; alpha 2 divides it by ((5 + L) / 6) ** 2, L tokens with EOS.
        length = 6 * math.sqrt(scores["0"][text] / scores["2"][text]) - 5
        assert round(length) >= 1 and length == pytest.approx(round(length), abs=0.05)
    src, ref = tmp_path / "src.de", tmp_path / "ref.en"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    ref.write_text("A man rides a bike.\n" * len(SENTENCES), encoding="utf-8")
    result = eval_files(trained_run, src, ref, "--beam", "2", "--length-penalty", "0.5", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["length_penalty"] == 0.5


def test_eval_reproduces_sacrebleu(trained_run: Path, tmp_path: Path, data_dir: Path) -> None:
    import sacrebleu

    from mt_cli.disk.reading import read_lines

    hyps_path = tmp_path / "hyps.en"
    result = invoke(
        "eval",
        "--bleu",
        "--run",
        str(trained_run),
        "--split",
        "val",
        "--beam",
        "1",
        "--json",
        "--output",
        str(hyps_path),
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    hyps = hyps_path.read_text(encoding="utf-8").splitlines()
    refs = read_lines(data_dir / "val.en.gz")
    assert len(hyps) == len(refs) == report["sentences"] == 1014
    assert report["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-9)
    assert report["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    src, ref = tmp_path / "val.de", tmp_path / "val.en"
    src.write_text("\n".join(read_lines(data_dir / "val.de.gz")[:40]) + "\n", encoding="utf-8")
    ref.write_text("\n".join(refs[:40]) + "\n", encoding="utf-8")
    subset = tmp_path / "subset.en"
    text = eval_files(trained_run, src, ref, "--beam", "1", "-o", str(subset))
    assert text.exit_code == 0
    expected = sacrebleu.corpus_bleu(subset.read_text(encoding="utf-8").splitlines(), [refs[:40]]).score
    assert f"BLEU = {expected:.2f}" in text.stdout


def test_average_command(trained_run: Path, tmp_path: Path) -> None:
    from mt_cli.checkpoint import Checkpoint
    from mt_cli.disk.layout import RunDir

    kept = RunDir(trained_run).step_checkpoints()[-2:]
    output = tmp_path / "avg.pt"
    result = invoke("average", str(trained_run), "--last", "2", "--output", str(output))
    assert result.exit_code == 0, result.output
    a, b, avg = (Checkpoint.load(p).model for p in (*kept, output))
    for key in ("encoder.0.ffn.linear1.weight", "decoder.1.cross_attn.kv.weight", "tgt_embed.weight"):
        assert not torch.equal(a[key], b[key]), key  # two different checkpoints, so the mean says something
        torch.testing.assert_close(avg[key], (a[key] + b[key]) / 2)
    assert (
        invoke("translate", SENTENCES[0], "--run", str(trained_run), "--checkpoint", str(output)).exit_code
        == 0
    )
    assert "needs that many" in one_error_line(invoke("average", str(trained_run), "--last", "50"))


def test_errors_are_one_line_with_exit_2(trained_run: Path, tmp_path: Path) -> None:
    assert "mt train" in one_error_line(invoke("translate", "Hallo", "--run", str(tmp_path / "none")))
    broken = tmp_path / "broken"
    shutil.copytree(trained_run, broken)
    best = broken / "checkpoints" / "best.pt"
    best.write_bytes(best.read_bytes()[:1000])
    assert "truncated" in one_error_line(invoke("translate", "Hallo", "--run", str(broken)))
    assert "does not exist" in one_error_line(
        invoke("translate", "Hallo", "--run", str(trained_run), "--checkpoint", "nope")
    )
    mismatched = tmp_path / "mismatched"
    shutil.copytree(trained_run, mismatched)
    (mismatched / "spm.en.model").write_bytes((mismatched / "spm.de.model").read_bytes())
    assert "does not match the tokenizers" in one_error_line(
        invoke("translate", "Hallo", "--run", str(mismatched))
    )
    latin1 = tmp_path / "latin1.de"
    latin1.write_bytes("Ein Mann\nGrüße\n".encode("latin-1"))
    assert "not UTF-8" in one_error_line(
        invoke("translate", "--run", str(trained_run), "--input", str(latin1))
    )
    assert "not UTF-8" in one_error_line(
        invoke("translate", "--run", str(trained_run), stdin=b"Gr\xfc\xdfe\n")
    )
    assert "does not exist" in one_error_line(
        invoke("translate", "--run", str(trained_run), "--input", str(tmp_path / "x"))
    )
    assert "go together" in one_error_line(invoke("eval", "--run", str(trained_run), "--src", str(latin1)))
    assert "cannot exceed" in one_error_line(
        invoke("translate", "x", "--run", str(trained_run), "--beam", "2", "--n-best", "3")
    )


def test_train_writes_the_run_directory(trained_run: Path) -> None:
    from mt_cli.checkpoint import Checkpoint
    from mt_cli.config.recipe import load_config

    assert load_config(trained_run / "config.yaml").run_dir == str(trained_run)
    for name in (
        "spm.de.model",
        "spm.en.model",
        "metrics.jsonl",
        "train.log",
        "test.json",
        "checkpoints/best.pt",
        "checkpoints/last.pt",
    ):
        assert (trained_run / name).exists(), name
    events = [json.loads(line) for line in (trained_run / "metrics.jsonl").read_text().splitlines()]
    val = [e for e in events if e["event"] == "val"]
    assert len(val) >= 3 and val[-1]["loss"] < val[0]["loss"]
    bleus = [e["bleu"] for e in val]
    assert max(bleus) > 0 and bleus[-1] > bleus[0]  # three epochs on 1,500 pairs already learn something
    best = [e for e in val if e["best"]]
    assert (
        best[-1]["bleu"] == max(bleus)
        and best[-1]["step"] == Checkpoint.load(trained_run / "checkpoints" / "best.pt").step
    )


@pytest.mark.parametrize("with_card", [True, False])
def test_a_run_translates_from_its_card_whatever_its_training_section_says(
    trained_run: Path, tmp_path: Path, with_card: bool
) -> None:
    # A training section this version would reject (a key renamed, a rule tightened) must not
    # stop a trained model from translating; checkpoints older than the card carry only the recipe.
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    best = run / "checkpoints" / "best.pt"
    payload = torch.load(best, weights_only=True)  # the file as data, as an older mt wrote it
    payload["config"]["train"] = {"lr": -1.0, "a_key_from_the_future": True}
    if not with_card:
        del payload["card"]
    torch.save(payload, best)
    fp32 = ComputeType.FLOAT32
    expected = Translator.of(load_trained(trained_run), compute_type=fp32).translate_lines(
        SENTENCES, TranslateOptions(beam=2)
    )
    assert (
        Translator.of(load_trained(run), compute_type=fp32).translate_lines(
            SENTENCES, TranslateOptions(beam=2)
        )
        == expected
    )


@pytest.mark.parametrize("decoding", [(), ("--beam", "5"), ("--sample", "--seed", "3")])
def test_a_lines_translation_does_not_depend_on_what_it_is_batched_with(
    trained_run: Path, tmp_path: Path, decoding: tuple[str, ...]
) -> None:
    # In the default precision (fp32 on a CPU): in bf16 the kernels' accumulation order follows the
    # batch's shapes, and an AMX Xeon changed 25 of 300 beam-5 lines between buffer sizes 64 and 7.
    lines = multi30k("test_2016_flickr", "de")[:64]
    source = tmp_path / "source.de"
    source.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    outputs = {}
    for size in (1, 7, 64):
        result = invoke(
            "translate", "--run", str(trained_run), "-i", str(source), "--buffer-size", str(size), *decoding
        )
        assert result.exit_code == 0, result.output
        outputs[size] = result.stdout.splitlines()
    assert len(outputs[64]) == len(lines)
    assert outputs[1] == outputs[7] == outputs[64]
