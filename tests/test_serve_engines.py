"""`mt serve` over the other engines, for real: an ensemble of a run with itself answers what the
run alone answers, alternatives included; CTranslate2's alternatives are `mt translate --engine
ctranslate2 --n-best` rows; the engine options fail as `mt translate`'s do, in one line.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from helpers import check_alternatives, n_best_rows, start_server

PAIR = {"source": "de", "target": "en"}


@pytest.fixture(scope="module")
def sentences(trained_run: Path) -> list[str]:
    """Three test2016 sentences of one source length: they decode the same in any batch."""
    from helpers import sentences_of_one_length

    from mt_cli.decode.translator import Translator
    from mt_cli.trained import load_trained

    return sentences_of_one_length(Translator.of(load_trained(trained_run), device="cpu"))[:3]


def _answers(url: str, sentences: list[str]) -> list[dict]:
    """The answers to the questions every engine is asked below: with and without alternatives."""
    with httpx.Client(timeout=60) as http:
        return [
            http.post(f"{url}/translate", json=body).json()
            for body in (
                {"q": sentences, **PAIR},
                {"q": sentences[0], **PAIR},
                {"q": sentences, **PAIR, "alternatives": 3},
                {"q": "\n".join(sentences), **PAIR, "alternatives": 2},
            )
        ]


def test_an_ensemble_of_a_run_with_itself_answers_as_the_run_alone(trained_run, sentences) -> None:
    alone = start_server(trained_run)
    try:
        expected = _answers(alone.url, sentences)
    finally:
        assert alone.stop() == 0
    twice = start_server(trained_run, "--ensemble", str(trained_run), "--ensemble-weights", "1,1")
    try:
        answers = _answers(twice.url, sentences)
    finally:
        assert twice.stop() == 0
    assert answers == expected
    assert all("error" not in answer for answer in answers)
    started = next(line for line in twice.stderr if line.startswith("mt serve: "))
    assert started.count("best.pt") == 2  # both members named: the ensemble is what is served
    assert "Traceback" not in "".join(twice.stderr)


def test_ctranslate2_alternatives_are_its_n_best_rows(trained_run, sentences, tmp_path) -> None:
    pytest.importorskip("ctranslate2")
    # `mt translate` makes the run's CTranslate2 export first; the server then reuses it.
    rows = n_best_rows(trained_run, sentences, tmp_path, "--engine", "ctranslate2")
    server = start_server(trained_run, "--engine", "ctranslate2")
    try:
        check_alternatives(server.url, rows)
    finally:
        assert server.stop() == 0
    assert "Traceback" not in "".join(server.stderr)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--engine", "ctranslate2", "--ensemble", "{run}"],
            "CTranslate2 has no ensembles; decode an ensemble with --engine mt",
        ),
        (["--ensemble-weights", "1,1"], "--ensemble-weights needs --ensemble: one weight per model"),
        (
            ["--ensemble", "{run}", "--ensemble-weights", "1"],
            "1 ensemble weights for 2 models; give one per model",
        ),
        (
            ["--ensemble", "{run}", "--ensemble-weights", "1,x"],
            "--ensemble-weights '1,x' is not a comma-separated list of numbers",
        ),
        (["--alternatives-limit", "-1"], None),
    ],
)
def test_engine_options_fail_in_one_line_as_mt_translates_do(trained_run, options, message) -> None:
    from typer.testing import CliRunner

    from mt_cli.cli import app

    command = ["serve", "--run", str(trained_run), "--port", "0", "--device", "cpu"]
    result = CliRunner().invoke(app, [*command, *(option.format(run=trained_run) for option in options)])
    assert result.exit_code == 2, result.output
    if message is not None:
        assert result.stderr == f"error: {message}\n"
    else:  # typer's own refusal of a value out of range
        assert "--alternatives-limit" in result.stderr and "Traceback" not in result.stderr
