"""`mt translate` and `mt eval` with sampling, ensembles and alignments, on the trained tiny run:
samples depend on the seed and the line only, an ensemble of a run with itself is the run,
alignments are Pharaoh pairs of word indices, and each bad option is one line, exit 2, no output."""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mt_cli.cli import app
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K

runner = CliRunner()
LINES = 24


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lines = read_lines(SHIPPED_MULTI30K / "val.de.gz")[:LINES]
    path = tmp_path_factory.mktemp("decoding") / "in.de"
    path.write_text("".join(line + "\n" for line in [*lines[:10], "", *lines[10:]]), encoding="utf-8")
    return path


def translate(run: Path, *args: str) -> list[str]:
    """`mt translate` in float32 (where samples are guaranteed batch-independent): its lines."""
    result = runner.invoke(app, ["translate", "--run", str(run), "--compute-type", "float32", *args])
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def shuffled_copy(source: Path, tmp_path: Path, seed: int) -> tuple[Path, list[int]]:
    lines = read_lines(source)
    order = list(range(len(lines)))
    random.Random(seed).shuffle(order)
    path = tmp_path / f"shuffled{seed}.de"
    path.write_text("".join(lines[i] + "\n" for i in order), encoding="utf-8")
    return path, order


@pytest.mark.parametrize("engine", ["mt", "ctranslate2"])
def test_a_sample_depends_on_the_seed_and_the_line_only(
    trained_run: Path, source: Path, tmp_path: Path, engine: str
) -> None:
    sample = ["--engine", engine, "--sample", "--top-p", "0.9", "--temperature", "1.3"]
    together = translate(trained_run, "-i", str(source), *sample, "--seed", "5")
    one_by_one = translate(trained_run, "-i", str(source), *sample, "--seed", "5", "--buffer-size", "1")
    path, order = shuffled_copy(source, tmp_path, seed=1)
    mixed = translate(trained_run, "-i", str(path), *sample, "--seed", "5", "--buffer-size", "7")
    unmixed = [""] * len(order)
    for position, index in enumerate(order):
        unmixed[index] = mixed[position]
    assert together == one_by_one == unmixed
    assert len(together) == LINES + 1 and together[10] == ""
    other_seed = translate(trained_run, "-i", str(source), *sample, "--seed", "6")
    assert sum(a != b for a, b in zip(together, other_seed)) >= LINES // 2


def test_both_engines_draw_the_same_samples(trained_run: Path, source: Path) -> None:
    # CTranslate2 computes the logits, mt's sampler draws: in float32 the logits agree to ~1e-6,
    # so only a draw that falls that close to the edge of a token's share could differ.
    sample = ["-i", str(source), "--sample", "--top-k", "30", "--seed", "11"]
    ours = translate(trained_run, *sample)
    theirs = translate(trained_run, *sample, "--engine", "ctranslate2")
    assert sum(a == b for a, b in zip(ours, theirs)) >= len(ours) - 2


def test_top_k_1_and_temperature_0_are_greedy(trained_run: Path, source: Path) -> None:
    greedy = translate(trained_run, "-i", str(source), "--beam", "1")
    assert translate(trained_run, "-i", str(source), "--sample", "--top-k", "1", "--seed", "3") == greedy
    assert translate(trained_run, "-i", str(source), "--sample", "--temperature", "0") == greedy
    ct2 = ["--engine", "ctranslate2", "--sample", "--top-k", "1"]
    assert translate(trained_run, "-i", str(source), *ct2) == greedy


@pytest.mark.parametrize(("beam", "n_best"), [("1", "1"), ("3", "3")])
def test_an_ensemble_of_a_run_with_itself_is_the_run(
    trained_run: Path, source: Path, beam: str, n_best: str
) -> None:
    options = ["-i", str(source), "--beam", beam, "--n-best", n_best]
    alone = [row.split(" ||| ") for row in translate(trained_run, *options)]
    for ensemble in (
        ["--ensemble", str(trained_run)],
        ["--ensemble", f"{trained_run}:best", "--ensemble-weights", "3,1"],
    ):
        both = [row.split(" ||| ") for row in translate(trained_run, *options, *ensemble)]
        assert [row[:2] for row in both] == [row[:2] for row in alone]  # token for token
        if n_best != "1":
            assert [float(r[2]) for r in both] == pytest.approx([float(r[2]) for r in alone], abs=2e-4)


def test_eval_with_an_ensemble(trained_run: Path, source: Path, tmp_path: Path) -> None:
    reference = tmp_path / "ref.en"
    reference.write_text("A dog runs.\n" * (LINES + 1), encoding="utf-8")
    reports = []
    for ensemble in ([], ["--ensemble", str(trained_run)]):
        args = ["eval", "--run", str(trained_run), "--src", str(source), "--ref", str(reference)]
        result = runner.invoke(app, [*args, "--beam", "1", "--compute-type", "float32", "--json", *ensemble])
        assert result.exit_code == 0, result.output
        reports.append(json.loads(result.stdout))
    assert reports[0]["bleu"] == reports[1]["bleu"] and reports[0]["chrf"] == reports[1]["chrf"]
    assert reports[1]["checkpoint"].count("best.pt") == 2


PHARAOH = re.compile(r"\d+-\d+( \d+-\d+)*")


def test_align_prints_pharaoh_word_pairs(trained_run: Path, source: Path) -> None:
    lines = read_lines(source)
    rows = translate(trained_run, "-i", str(source), "--align", "--beam", "2")
    assert len(rows) == len(lines)
    for line, row in zip(lines, rows):
        text, pairs = row.split(" ||| ")
        if not line:
            assert (text, pairs) == ("", "")
            continue
        assert PHARAOH.fullmatch(pairs), pairs
        found = [tuple(map(int, pair.split("-"))) for pair in pairs.split()]
        assert found == sorted(set(found))
        assert all(i < len(line.split()) and j < len(text.split()) for i, j in found)
        assert {j for _, j in found} == set(range(len(text.split())))  # each target word aligns
    records = [
        json.loads(r)
        for r in translate(
            trained_run, "-i", str(source), "--align", "--json", "--beam", "2", "--n-best", "2"
        )
    ]
    assert [r["text"] for r in records] == [row.split(" ||| ")[0] for row in rows]
    assert [r["alignment"] for r in records[:3]] == [
        [list(map(int, p.split("-"))) for p in row.split(" ||| ")[1].split()] for row in rows[:3]
    ]
    assert all(len(r["n_best"]) == (2 if r["source"] else 1) for r in records)
    first_layer = translate(
        trained_run, "-i", str(source), "--align", "--beam", "2", "--alignment-layer", "0"
    )
    assert [r.split(" ||| ")[0] for r in first_layer] == [r.split(" ||| ")[0] for r in rows]


@pytest.fixture(scope="module")
def other_tokenizer_run(trained_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trained run with its English tokenizer changed in one piece's score: the same
    vocabulary size (the model loads), different SentencePiece bytes."""
    from sentencepiece import sentencepiece_model_pb2

    run = tmp_path_factory.mktemp("other") / "run"
    shutil.copytree(trained_run, run, ignore=shutil.ignore_patterns("exports"))
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString((run / "spm.en.model").read_bytes())
    proto.pieces[100].score -= 1.0
    (run / "spm.en.model").write_bytes(proto.SerializeToString())
    return run


def bad_inputs(run: Path, other: Path) -> list[tuple[list[str], str]]:
    return [
        (["--sample", "--top-p", "0"], "top-p 0.0 must be in (0, 1]"),
        (["--sample", "--top-p", "1.5"], "top-p 1.5 must be in (0, 1]"),
        (["--sample", "--temperature", "-1"], "temperature -1.0 must be a number >= 0 (0 means greedy)"),
        (["--sample", "--top-k", "0"], "top-k 0 must be at least 1"),
        (["--sample", "--beam", "2"], "cannot search with beam 2"),
        (["--beam", "0"], "beam size 0 must be at least 1 (1 is greedy search)"),  # the rules' words
        (["--length-penalty", "-1"], "length penalty -1.0 must be a number >= 0 (0 turns it off)"),
        (["--n-best", "0"], "n-best 0 must be at least 1"),
        (["--top-k", "5", "--seed", "1"], "--top-k, --seed work only with --sample"),
        (["--align", "--engine", "ctranslate2"], "--align needs --engine mt"),
        (["--align", "--alignment-layer", "9"], "decoder layer 9 does not exist; the decoder has 2 layers"),
        (["--alignment-layer", "1"], "needs alignments (--align)"),
        (["--ensemble", str(other)], f"differ from {run / 'checkpoints' / 'best.pt'}: {other}"),
        (["--engine", "ctranslate2", "--ensemble", str(run)], "CTranslate2 has no ensembles"),
        (["--ensemble", str(run), "--ensemble-weights", "1,x"], "not a comma-separated list of numbers"),
        (["--ensemble", str(run), "--ensemble-weights", "1,2,3"], "3 ensemble weights for 2 models"),
        (["--compute-type", "int8"], "compute type int8 is CTranslate2's"),
    ]


def test_bad_options_are_one_line_exit_2_and_nothing_written(
    trained_run: Path, other_tokenizer_run: Path, source: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.en"
    for args, message in bad_inputs(trained_run, other_tokenizer_run):
        command = ["translate", "--run", str(trained_run), "-i", str(source), "-o", str(out), *args]
        result = runner.invoke(app, command)
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 2, (args, result.output)
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], (args, lines)
        assert not out.exists() and result.stdout == "", args
    other = runner.invoke(app, ["eval", "--run", str(trained_run), "--ensemble", str(other_tokenizer_run)])
    assert other.exit_code == 2 and "(target)" in other.stderr and len(other.stderr.strip().splitlines()) == 1
