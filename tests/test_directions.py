"""Choosing the target language at translation time, and every direction a model knows.

One tiny many-to-English model per module (de, fr and cs into English, with target tags, on
small slices of the shipped Multi30k files): each engine puts ``<2en>`` before every source as
one piece, ``--tgt-lang`` and ``--src-lang`` are checked, ``mt serve`` lists and selects the
directions, and training validates and tests each direction.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import CONFIGS, quiet, start_server
from helpers import MANY_TO_ENGLISH_SLICES as SLICES
from helpers import MANY_TO_ENGLISH_SOURCES as SOURCES

from mt_cli.api import load
from mt_cli.config.card import target_language
from mt_cli.config.options import TranslateOptions
from mt_cli.config.recipe import load_config
from mt_cli.config.sections import DataConfig
from mt_cli.decode.alignment import word_alignment
from mt_cli.decode.members import ensemble_of
from mt_cli.decode.translator import Translator
from mt_cli.disk.reading import read_lines
from mt_cli.errors import InputError
from mt_cli.runtime.precision import ComputeType
from mt_cli.serve.app import languages_of
from mt_cli.serve.detect import Detector
from mt_cli.specials import EOS_ID
from mt_cli.trained import load_trained

DIRECTIONS = (("de", "en"), ("fr", "en"), ("cs", "en"))


@pytest.fixture(scope="module")
def run(many_to_english: Path) -> Path:
    return many_to_english


@pytest.fixture(scope="module")
def sentences(many_to_english_sentences: dict[str, str]) -> dict[str, str]:
    return many_to_english_sentences


@pytest.fixture(scope="module")
def translator(run: Path) -> Translator:
    return Translator.of(load_trained(run), device="cpu", compute_type=ComputeType.FLOAT32)


def mt(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "mt_cli", *args], capture_output=True, text=True, env=env)


class Recorder:
    """Stands in for a method and keeps what each call got."""

    def __init__(self, method: Any) -> None:
        self.method, self.calls = method, []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(args)
        return self.method(*args, **kwargs)


def test_a_many_to_english_model_knows_its_three_directions(translator: Translator, run: Path) -> None:
    assert translator.directions == DIRECTIONS
    assert load(run, device="cpu").directions == DIRECTIONS
    assert languages_of(translator.directions) == [
        {"code": "de", "name": "German", "targets": ["en"]},
        {"code": "en", "name": "English", "targets": []},
        {"code": "fr", "name": "French", "targets": ["en"]},
        {"code": "cs", "name": "Czech", "targets": ["en"]},
    ]


def test_every_source_reaches_the_model_after_the_target_tag_as_one_piece(
    translator: Translator, sentences: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tok = translator.src_tok
    tag = tok.tags["<2en>"]
    assert tok.to_pieces([tag]) == ["<2en>"]
    recorder = Recorder(translator.model.encode)
    monkeypatch.setattr(translator.model, "encode", recorder)
    for lang in SOURCES:
        for tgt_lang in ("en", None):  # asked for, or the card's
            translator.translate([sentences[lang], ""], TranslateOptions(beam=1, tgt_lang=tgt_lang))
            src = recorder.calls.pop()[0]  # (B, S): the one non-empty line (an empty one is not decoded)
            assert src.tolist() == [[tag, *tok.encode([sentences[lang]])[0], EOS_ID]]
    # Scoring and forced alignment put it there too.
    translator.score([sentences["fr"]], ["A dog."])
    translator.align([sentences["cs"]], ["A dog."])
    for call, lang in zip(recorder.calls, ("fr", "cs")):
        assert call[0].tolist() == [[tag, *tok.encode([sentences[lang]])[0], EOS_ID]]


def test_an_ensemble_puts_the_tag_before_its_sources_too(
    run: Path, sentences: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    members = [
        Translator.of(load_trained(run), device="cpu", compute_type=ComputeType.FLOAT32) for _ in range(2)
    ]
    ensemble = ensemble_of(members)
    recorder = Recorder(ensemble.model.encode)
    monkeypatch.setattr(ensemble.model, "encode", recorder)
    assert ensemble.directions == DIRECTIONS
    ensemble.translate_lines([sentences["de"]], TranslateOptions(beam=1, tgt_lang="en"))
    tag = ensemble.src_tok.tags["<2en>"]
    assert recorder.calls[0][0].tolist() == [[tag, *ensemble.src_tok.encode([sentences["de"]])[0], EOS_ID]]


def test_the_ctranslate2_engine_sends_the_tag_and_translates_as_mt_does(
    run: Path, translator: Translator, sentences: dict[str, str]
) -> None:
    engine = load(run, engine="ctranslate2", device="cpu").engine
    recorder = Recorder(engine.translator.translate_batch)  # type: ignore[attr-defined]
    engine.translator = _Proxy(engine.translator, translate_batch=recorder)  # type: ignore[attr-defined]
    lines = [sentences[lang] for lang in SOURCES]
    ours = engine.translate_lines(lines, TranslateOptions(beam=1, tgt_lang="en"))
    sent = [tokens for call in recorder.calls for tokens in call[0]]
    assert sorted(sent) == sorted(["<2en>", *engine.src_tok.pieces(line)] for line in lines)
    assert ours == translator.translate_lines(lines, TranslateOptions(beam=1, tgt_lang="en"))


class _Proxy:
    """An object whose attributes are another's, except those given."""

    def __init__(self, inner: Any, **replaced: Any) -> None:
        self._inner, self._replaced = inner, replaced

    def __getattr__(self, name: str) -> Any:
        return self._replaced[name] if name in self._replaced else getattr(self._inner, name)


def test_tgt_lang_on_the_command_line_gives_both_engines_the_same_lines(
    run: Path, translator: Translator, sentences: dict[str, str], tmp_path: Path
) -> None:
    source = tmp_path / "in.txt"
    lines = [sentences[lang] for lang in SOURCES]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    expected = translator.translate_lines(lines, TranslateOptions(beam=1, tgt_lang="en"))
    common = ["translate", "--run", str(run), "--device", "cpu", "--beam", "1", "-i", str(source)]
    mine = mt(*common, "--tgt-lang", "en", "--compute-type", "float32")
    theirs = mt(*common, "--tgt-lang", "en", "--engine", "ctranslate2")
    checked = mt(*common, "--tgt-lang", "en", "--src-lang", "fr", "--compute-type", "float32")
    for result in (mine, theirs, checked):
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.splitlines() == expected


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--tgt-lang", "error: target language 'fr' is not one this model writes; it writes en"),
        ("--src-lang", "error: source language 'en' is not one this model reads; it reads de, fr, cs"),
    ],
)
def test_a_language_the_model_does_not_know_is_one_line_and_exit_2(
    run: Path, option: str, message: str
) -> None:
    value = "fr" if option == "--tgt-lang" else "en"
    result = mt("translate", "--run", str(run), "--device", "cpu", option, value, "Ein Hund.")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [message]


def test_mt_score_and_mt_eval_check_the_languages_too(run: Path, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("Ein Hund.\tA dog.\n", encoding="utf-8")
    output = tmp_path / "scores.txt"
    score = mt(
        "score", "--run", str(run), "--device", "cpu", "-i", str(pairs), "-o", str(output), "--tgt-lang", "de"
    )
    evaluation = mt("eval", "--run", str(run), "--device", "cpu", "--src-lang", "fr", "--tgt-lang", "fr")
    assert (score.returncode, evaluation.returncode) == (2, 2)
    assert score.stderr.strip().splitlines() == [
        "error: target language 'de' is not one this model writes; it writes en"
    ]
    assert evaluation.stderr.strip().splitlines() == [
        "error: target language 'fr' is not one this model writes; it writes en"
    ]
    assert not output.exists()


def test_the_api_checks_the_target_and_takes_it_for_translate_score_and_align(
    run: Path, sentences: dict[str, str]
) -> None:
    model = load(run, device="cpu", compute_type="float32")
    line = sentences["fr"]
    assert model.translate([line], tgt_lang="en")[0].text == model.translate([line])[0].text
    assert model.translate([line], src_lang="fr", tgt_lang="en")[0].text == model.translate([line])[0].text
    assert model.score([line], ["A dog."], tgt_lang="en") == model.score([line], ["A dog."])
    assert model.align([line], ["A dog."], tgt_lang="en") == model.align([line], ["A dog."])
    for call in (
        lambda: model.translate([line], tgt_lang="de"),
        lambda: model.score([line], ["Ein Hund."], tgt_lang="de"),
        lambda: model.align([line], tgt_lang="de"),
    ):
        with pytest.raises(
            InputError, match="^target language 'de' is not one this model writes; it writes en$"
        ):
            call()


def test_alignments_count_the_users_words_not_the_tag(
    translator: Translator, sentences: dict[str, str]
) -> None:
    line = sentences["de"]
    [found] = translator.translate([line], TranslateOptions(beam=1, align=True))
    src_pieces, tgt_pieces, attention = translator.attention(line, found.best.tokens)
    assert src_pieces[0] == "<2en>" and src_pieces[-1] == "</s>"
    # The tag's column is dropped before the argmax, so word 0 is the user's first word.
    expected = word_alignment(attention[:, 1:], src_pieces[1:-1], tgt_pieces[:-1])
    assert found.best.alignment == tuple(expected)
    assert max(i for i, _ in expected) < len(line.split())
    assert {j for _, j in expected} == set(range(len(found.text.split())))  # every target word aligned


def test_mt_serve_lists_every_direction_and_selects_the_target(run: Path, sentences: dict[str, str]) -> None:
    # What the server decodes with (the default precision).
    expected = Translator.of(load_trained(run), device="cpu")
    server = start_server(run)
    try:
        with httpx.Client(timeout=60) as http:
            languages = http.get(f"{server.url}/languages").json()
            answers = {
                lang: http.post(
                    f"{server.url}/translate", json={"q": sentences[lang], "source": lang, "target": "en"}
                ).json()
                for lang in SOURCES
            }
            auto = http.post(
                f"{server.url}/translate", json={"q": sentences["cs"], "source": "auto", "target": "en"}
            )
            bad = {
                name: http.post(f"{server.url}/translate", json={"q": "x", **fields})
                for name, fields in {
                    "source": {"source": "en", "target": "en"},
                    "target": {"source": "fr", "target": "de"},
                    "auto target": {"source": "auto", "target": "it"},
                }.items()
            }
    finally:
        assert server.stop() == 0
    assert "mt serve: de -> en, fr -> en, cs -> en at " in "".join(server.stderr)
    assert languages == [
        {"code": "de", "name": "German", "targets": ["en"]},
        {"code": "en", "name": "English", "targets": []},
        {"code": "fr", "name": "French", "targets": ["en"]},
        {"code": "cs", "name": "Czech", "targets": ["en"]},
    ]
    for lang in SOURCES:
        assert answers[lang] == {
            "translatedText": expected.translate_lines([sentences[lang]], TranslateOptions(tgt_lang="en"))[0]
        }
    assert auto.json()["detectedLanguage"]["language"] == "cs"
    assert auto.json() == {
        "translatedText": expected.translate_lines([sentences["cs"]])[0],
        "detectedLanguage": Detector(["de", "en", "fr", "cs"]).rank(sentences["cs"])[0].answer(),
    }
    directions = "this server translates de -> en, fr -> en, cs -> en"
    assert {name: (r.status_code, r.json()) for name, r in bad.items()} == {
        "source": (
            400,
            {"error": "en is not supported as a source language; this server has de, fr, cs (or auto)"},
        ),
        "target": (400, {"error": f"fr -> de is not available; {directions}"}),
        "auto target": (400, {"error": f"auto -> it is not available; {directions}"}),
    }


def test_training_validates_and_tests_every_direction(run: Path) -> None:
    events = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    [val] = [e for e in events if e["event"] == "val"]
    assert list(val["directions"]) == ["de-en", "fr-en", "cs-en"]
    first = val["directions"]["de-en"]
    assert (first["loss"], first["bleu"], first["chrf"]) == (val["loss"], val["bleu"], val["chrf"])
    # Each direction's val loss is that of its sources after the target tag, as the engine puts it:
    # `score` of the val pairs with best.pt (the weights of that validation) gives it back.
    model = load(
        run, device="cpu", compute_type="float32", warn=quiet
    )  # cut sources, as validation cuts them
    for lang in SOURCES:
        root = run.parent
        scores = model.score(read_lines(root / f"val.{lang}"), read_lines(root / "val.en"), tgt_lang="en")
        nll = -sum(s.log_prob for s in scores) / sum(s.tokens for s in scores)
        assert nll == pytest.approx(val["directions"][f"{lang}-en"]["loss"], rel=1e-4)
    assert val["directions"]["fr-en"]["loss"] != val["loss"]  # another val set, scored on its own
    report = json.loads((run / "test.json").read_text())
    assert list(report["directions"]) == ["de-en", "fr-en", "cs-en"]
    assert report["scores"] == report["directions"]["de-en"]  # the keys of a one-direction run
    for scores in report["directions"].values():
        assert set(scores) == {"greedy", "beam3"}
        assert scores["beam3"]["sentences"] == SLICES["test2016"][1]
    # `mt eval` of a direction scores what test.json says for it.
    result = mt("eval", "--run", str(run), "--device", "cpu", "--src-lang", "fr", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    printed = json.loads(result.stdout)
    assert (printed["src_lang"], printed["tgt_lang"], printed["sentences"]) == ("fr", "en", 30)
    assert printed["bleu"] == report["directions"]["fr-en"]["beam3"]["bleu"]


def test_a_one_direction_card_has_one_direction_and_knows_its_target() -> None:
    data = DataConfig()
    assert data.directions() == (("de", "en"),)
    assert target_language(data) == target_language(data, "en", "de") == "en"
    with pytest.raises(InputError, match="^target language 'fr' is not one this model writes; it writes en$"):
        target_language(data, "fr")
    with pytest.raises(InputError, match="^source language 'fr' is not one this model reads; it reads de$"):
        target_language(data, None, "fr")
    both = load_config(
        CONFIGS / "tiny.yaml",
        ["data.corpora=[{source: multi30k}, {source: multi30k, src_lang: en, tgt_lang: de}]"],
    ).data
    assert both.directions() == (("de", "en"), ("en", "de"))
    assert target_language(both, "de", "en") == "de"
    with pytest.raises(
        InputError,
        match="^de -> de is not a direction this model was trained on; it knows de -> en, en -> de$",
    ):
        target_language(both, "de", "de")
