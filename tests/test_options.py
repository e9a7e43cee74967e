"""``TranslateOptions``, the one decoding-options type: its rules in one place, equal options from
the command line, the API, ``mt serve`` and a back-translation corpus for equal settings, the old
flat corpus keys read with a warning, and a beam too wide for the vocabulary refused up front
(``mt translate`` as a process: exit 2; ``mt serve`` as a process: exit 2 at startup, and a 400)."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from helpers import start_server
from typer.testing import CliRunner

from mt_cli.api import load
from mt_cli.cli import app
from mt_cli.config.options import OptionError, Sampling, TranslateOptions
from mt_cli.config.recipe import config_from_dict
from mt_cli.data import synthetic
from mt_cli.decode.translator import Translator
from mt_cli.errors import ConfigError
from mt_cli.serve import server
from mt_cli.serve.app import Settings, create_app

LINE = "Ein Hund läuft über die Wiese."


@pytest.mark.parametrize(
    ("make", "key", "message"),
    [
        (lambda: TranslateOptions(beam=0), "beam", "beam size 0 must be at least 1 (1 is greedy search)"),
        (lambda: TranslateOptions(n_best=0), "n_best", "n-best 0 must be at least 1"),
        (lambda: TranslateOptions(length_penalty=-1.0), "length_penalty", "length penalty -1.0 must be"),
        (lambda: TranslateOptions(beam=2, sampling=Sampling()), "beam", "cannot search with beam 2"),
        (lambda: TranslateOptions(alignment_layer=1), "alignment_layer", "an alignment layer needs"),
        (lambda: Sampling(top_k=0), "top_k", "top-k 0 must be at least 1"),
        (lambda: Sampling(top_p=0.0), "top_p", "top-p 0.0 must be in (0, 1]"),
        (lambda: Sampling(temperature=float("nan")), "temperature", "temperature nan must be"),
    ],
)
def test_each_rule_is_the_options_own_and_names_the_option(make: Any, key: str, message: str) -> None:
    with pytest.raises(OptionError, match=re.escape(message)) as caught:
        make()
    assert caught.value.key == key


def test_the_recipes_decoding_defaults_follow_the_same_rules() -> None:
    with pytest.raises(ConfigError, match=r"^decode.beam_size: beam size 0 must be at least 1"):
        config_from_dict({"decode": {"beam_size": 0}})
    with pytest.raises(ConfigError, match=r"^decode.length_penalty: length penalty -0.5 must be"):
        config_from_dict({"decode": {"length_penalty": -0.5}})
    with pytest.raises(ConfigError, match=r"^decode.beam_size: beam size 51 is too wide .* at most 50$"):
        config_from_dict({"tokenizer": {"tgt_vocab_size": 100}, "decode": {"beam_size": 51}})


def test_resolving_refuses_a_beam_wider_than_half_the_vocabulary() -> None:
    assert TranslateOptions(beam=250).resolved(5, 1.0, "en", vocabulary=500).beam == 250
    with pytest.raises(
        OptionError, match=r"^beam size 251 is too wide .* 500 pieces allows a beam of at most 250$"
    ):
        TranslateOptions(beam=251).resolved(5, 1.0, "en", vocabulary=500)
    with pytest.raises(OptionError, match="beam of at most 2$"):  # the card's default beam too
        TranslateOptions().resolved(5, 1.0, "en", vocabulary=4)


# --- equal settings, equal options, whoever builds them ---

# (mt translate's options, the API's keywords, mt serve's options or None (it does not sample),
# a back-translation entry's decode block, the same in the flat keys of earlier versions or None)
SETTINGS = [
    (
        ["--beam", "4", "--length-penalty", "0.6"],
        {"beam": 4, "length_penalty": 0.6},
        ["--beam", "4", "--length-penalty", "0.6"],
        {"beam": 4, "length_penalty": 0.6},
        None,
    ),
    (["--beam", "1"], {"beam": 1}, ["--beam", "1"], {"beam": 1}, {"beam_size": 1}),
    (
        ["--sample", "--top-k", "10", "--seed", "3"],
        {"sampling": Sampling(top_k=10, seed=3)},
        None,
        {"sampling": {"top_k": 10, "seed": 3}},
        {"sampling": True, "top_k": 10, "seed": 3},
    ),
    (
        ["--sample", "--top-p", "0.9", "--temperature", "0.7"],
        {"sampling": Sampling(top_p=0.9, temperature=0.7)},
        None,
        {"sampling": {"top_p": 0.9, "temperature": 0.7}},
        {"sampling": True, "top_p": 0.9, "temperature": 0.7},
    ),
]


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[TranslateOptions]]:
    """The options every ``Translator.translate`` call gets, in order."""
    seen: list[TranslateOptions] = []
    translate = Translator.translate

    def recording(self: Translator, lines: Any, options: TranslateOptions, *args: Any, **kwargs: Any) -> Any:
        seen.append(options)
        return translate(self, lines, options, *args, **kwargs)

    monkeypatch.setattr(Translator, "translate", recording)
    yield seen


def served_options(
    run: Path, args: list[str], monkeypatch: pytest.MonkeyPatch, seen: list
) -> TranslateOptions:
    """What `mt serve ARGS` decodes a request with: the command runs in this process up to the
    server, whose app then answers one request here."""
    apps = []
    monkeypatch.setattr(server, "serve", lambda app, listener, settings: apps.append(app) or True)
    result = CliRunner().invoke(app, ["serve", "--run", str(run), "--port", "0", "--device", "cpu", *args])
    assert result.exit_code == 0, result.output
    with TestClient(apps[0]) as client:
        answer = client.post("/translate", json={"q": LINE, "source": "de", "target": "en"})
    assert answer.status_code == 200, answer.text
    return seen[-1]


def corpus_options(block: dict[str, Any], translator: Translator) -> TranslateOptions:
    """What a forward-translation corpus (German text, into English) with ``block`` decodes with."""
    entry = {"source": "backtranslation", "run": "runs/de-en", "text": ["captions.de"], "side": "source"}
    cfg = config_from_dict({"data": {"corpora": [{"source": "multi30k"}, {**entry, **block}]}})
    kept = translator.resolve(synthetic.options_of(cfg.data.entries()[1]))
    assert kept.scores  # a corpus keeps every translation's score (min_score reads them)
    return dataclasses.replace(kept, scores=False)


@pytest.mark.parametrize(("cli", "keywords", "serve", "block", "flat"), SETTINGS)
def test_the_cli_the_api_serve_and_a_corpus_build_equal_options(
    trained_run: Path,
    fp32: Translator,
    decoded: list[TranslateOptions],
    monkeypatch: pytest.MonkeyPatch,
    cli: list[str],
    keywords: dict[str, Any],
    serve: list[str] | None,
    block: dict[str, Any],
    flat: dict[str, Any] | None,
) -> None:
    result = CliRunner().invoke(app, ["translate", "--run", str(trained_run), "--device", "cpu", *cli, LINE])
    assert result.exit_code == 0, result.output
    built = {"mt translate": decoded[-1]}
    # The API's default keeps scores (the command line prints none): the same setting says so.
    built["api"] = load(trained_run, device="cpu").options(**keywords, scores=False)
    built["a corpus's decode block"] = corpus_options({"decode": block}, fp32)
    if flat is not None:
        built["a corpus's flat keys"] = corpus_options(flat, fp32)
    if serve is not None:
        built["mt serve"] = served_options(trained_run, serve, monkeypatch, decoded)
    alpha = fp32.card.decode.length_penalty
    expected = TranslateOptions(**keywords, scores=False).resolved(fp32.beam_size, alpha, "en")
    assert built == dict.fromkeys(built, expected)


def test_the_flat_keys_of_earlier_versions_load_with_one_line_naming_the_block(tmp_path: Path) -> None:
    recipe = tmp_path / "old.yaml"
    recipe.write_text(
        "data:\n  corpora:\n    - {source: multi30k}\n"
        "    - {source: backtranslation, run: r, text: [t.en], sampling: true, top_k: 10, seed: 1}\n",
        encoding="utf-8",
    )
    shown = subprocess.run(
        [sys.executable, "-m", "mt_cli", "config", "--config", str(recipe)], capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr == (
        "data.corpora[1].sampling, data.corpora[1].top_k, data.corpora[1].seed are deprecated: "
        "write data.corpora[1].decode: {sampling: {top_k: 10, seed: 1}}\n"
    )
    assert "decode:" in shown.stdout and "top_k: 10" in shown.stdout


# --- a beam too wide for the vocabulary: refused before any decoding, by the real processes ---


def mt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mt_cli", *args], capture_output=True, text=True, timeout=300
    )


def test_mt_translate_refuses_a_beam_over_half_the_vocabulary(trained_run: Path, fp32: Translator) -> None:
    widest = fp32.tgt_tok.vocab_size // 2
    too_wide = mt("translate", "--run", str(trained_run), "--device", "cpu", "--beam", str(widest + 1), LINE)
    assert (too_wide.returncode, too_wide.stdout) == (2, "")
    assert too_wide.stderr == (
        f"error: beam size {widest + 1} is too wide for this model: its target vocabulary of "
        f"{fp32.tgt_tok.vocab_size} pieces allows a beam of at most {widest}\n"
    )
    widest_ok = mt("translate", "--run", str(trained_run), "--device", "cpu", "--beam", str(widest), LINE)
    assert widest_ok.returncode == 0 and widest_ok.stdout.count("\n") == 1, widest_ok.stderr


def test_mt_serve_refuses_a_beam_or_alternatives_limit_over_half_the_vocabulary_at_startup(
    trained_run: Path, fp32: Translator
) -> None:
    widest = fp32.tgt_tok.vocab_size // 2
    serve = ["serve", "--run", str(trained_run), "--port", "0", "--device", "cpu"]
    limit = f"allows a beam of at most {widest}\n"
    beam = mt(*serve, "--beam", str(widest + 1))
    assert beam.returncode == 2 and beam.stderr.count("\n") == 1 and beam.stderr.endswith(limit), beam.stderr
    # N alternatives decode in a beam of N + 1.
    alternatives = mt(*serve, "--alternatives-limit", str(widest))
    assert alternatives.returncode == 2 and alternatives.stderr.endswith(limit), alternatives.stderr
    widest_server = start_server(trained_run, "--alternatives-limit", str(widest - 1))
    try:
        answer = httpx.post(
            f"{widest_server.url}/translate",
            json={"q": LINE, "source": "de", "target": "en", "alternatives": widest - 1},
            timeout=120,
        )
    finally:
        assert widest_server.stop() == 0
    assert answer.status_code == 200 and answer.json()["translatedText"], answer.text


def test_a_request_the_engine_cannot_decode_is_a_400_never_a_500(fp32: Translator) -> None:
    widest = fp32.tgt_tok.vocab_size // 2
    settings = Settings(alternatives_limit=widest + 10)  # what `mt serve` itself refuses to start with
    with TestClient(create_app(fp32, settings)) as client:
        answer = client.post(
            "/translate", json={"q": LINE, "source": "de", "target": "en", "alternatives": widest}
        )
    assert answer.status_code == 400
    assert answer.json()["error"].endswith(f"allows a beam of at most {widest}")
