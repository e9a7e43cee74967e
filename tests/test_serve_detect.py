"""Language detection for ``/detect`` and ``source: "auto"`` (``mt_cli/serve/detect.py``): its
accuracy on samples of the shipped test2016 files (the whole set: scripts/detect-accuracy.py,
docs/results.md), its answers for text it cannot check, then for real through `mt serve`:
English sent to a de -> en model is named and refused, never translated as German, and the
many-to-English model answers each line's own language.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest
from helpers import MANY_TO_ENGLISH_SOURCES, ServeProcess, in_process, start_server

from mt_cli.config.options import TranslateOptions
from mt_cli.decode.translator import Translator
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.serve.app import Settings, create_app
from mt_cli.serve.detect import Detector, auto_sources, detect
from mt_cli.serve.errors import ApiError
from mt_cli.serve.scope import Scope
from mt_cli.trained import load_trained

DE_EN = Scope("de", "en", 5000, 100)
MANY_TO_EN = Scope("de", "en", 5000, 100, more=(("fr", "en"), ("cs", "en")))
ENGLISH = "A man in a blue shirt is standing on a ladder cleaning windows."
SAMPLE = 100  # test2016 lines a language: every tenth


def languages_of(scope: Scope) -> list[str]:
    return [code for direction in scope.directions for code in direction]


@pytest.fixture(scope="module")
def many_to_en() -> Detector:
    return Detector(languages_of(MANY_TO_EN))


@pytest.fixture(scope="module")
def de_en() -> Detector:
    return Detector(languages_of(DE_EN))


def lines_of(lang: str) -> list[str]:
    return read_lines(SHIPPED_MULTI30K / f"test_2016_flickr.{lang}.gz")[::10][:SAMPLE]


def short_spans(lines: list[str], seed: int = 0) -> list[str]:
    """1, 2 or 3 words of each line (cycling), at a random place, as scripts/detect-accuracy.py takes them."""
    rng, spans = random.Random(seed), []
    for index, line in enumerate(lines):
        words = line.split()
        count = min(index % 3 + 1, len(words))
        start = rng.randint(0, len(words) - count)
        spans.append(" ".join(words[start : start + count]).strip(".,;:!?\"'"))
    return spans


def share_right(detector: Detector, scope: Scope, texts: dict[str, list[str]]) -> float:
    """The share of texts whose ``source: "auto"`` source is their own language."""
    right = total = 0
    for lang, lines in texts.items():
        for line in lines:
            try:
                [guess] = auto_sources(detector, [line], "en", scope)
            except ApiError:
                guess = None
            right += guess is not None and guess.language == lang
            total += 1
    return right / total


def test_whole_test2016_lines_get_their_own_language_from_the_many_to_english_model(many_to_en) -> None:
    texts = {lang: lines_of(lang) for lang in MANY_TO_ENGLISH_SOURCES}
    assert share_right(many_to_en, MANY_TO_EN, texts) >= 0.99  # on all 3,000 lines: docs/results.md


def test_one_to_three_words_get_their_own_language_most_of_the_time(many_to_en) -> None:
    texts = {lang: short_spans(lines_of(lang)) for lang in MANY_TO_ENGLISH_SOURCES}
    # On all of test2016 the share is 0.9 (docs/results.md); a sample of 300 is near it.
    assert share_right(many_to_en, MANY_TO_EN, texts) >= 0.85


def test_english_and_french_lines_are_refused_by_a_de_en_model(de_en) -> None:
    for lang in ("en", "fr"):
        for line in lines_of(lang)[:20]:
            with pytest.raises(ApiError) as refused:
                auto_sources(de_en, ["Ein Hund.", line], "en", DE_EN)
            assert refused.value.status == 400
            assert refused.value.message.startswith("q[1] looks like ")
            assert f"({lang}, confidence " in refused.value.message
    with pytest.raises(
        ApiError,
        match=r"^q looks like English \(en, confidence (9\d|100)\.\d\d\): this model cannot "
        r"translate from en; it translates de -> en$",
    ):
        auto_sources(de_en, [ENGLISH], "en", DE_EN)


def test_a_source_into_a_target_the_model_does_not_write_it_from_is_refused() -> None:
    both = Scope("de", "en", 5000, 100, more=(("en", "de"),))
    detector = Detector(languages_of(both))
    [guess] = auto_sources(detector, [ENGLISH], "de", both)
    assert guess.language == "en"
    with pytest.raises(
        ApiError, match=r"this model cannot translate en -> en; it translates de -> en, en -> de$"
    ):
        auto_sources(detector, [ENGLISH], "en", both)


def test_detect_lists_the_likeliest_languages_with_confidences_that_sum_to_at_most_100(de_en) -> None:
    found = detect(de_en, ENGLISH, DE_EN)
    assert found[0].language == "en" and found[0].confidence > 90
    assert 1 <= len(found) <= 3
    assert [g.confidence for g in found] == sorted((g.confidence for g in found), reverse=True)
    assert sum(g.confidence for g in found) <= 100 + 1e-9
    assert detect(de_en, "Pes běží přes trávu.", DE_EN)[0].answer() == {"confidence": 100.0, "language": "cs"}


def test_text_that_cannot_be_checked_is_the_first_source_at_confidence_0(de_en) -> None:
    for text in ("123 !!", "\n", "🙂"):
        assert [g.answer() for g in detect(de_en, text, DE_EN)] == [{"confidence": 0.0, "language": "de"}]
        assert [g.answer() for g in auto_sources(de_en, [text], "en", DE_EN)] == [
            {"confidence": 0.0, "language": "de"}
        ]
    unknown = Scope("xx", "en", 5000, 100)
    detector = Detector(languages_of(unknown))
    assert not detector.knows("xx") and detector.knows("en")
    assert [g.answer() for g in auto_sources(detector, [ENGLISH], "en", unknown)] == [
        {"confidence": 0.0, "language": "xx"}
    ]


def test_a_model_code_is_matched_by_its_primary_subtag_and_answered_as_the_model_writes_it() -> None:
    scope = Scope("pt_BR", "en", 5000, 100, more=(("deu", "en"),))
    detector = Detector(languages_of(scope))
    assert detector.knows("pt_BR") and detector.knows("deu")
    assert (
        auto_sources(detector, ["Um homem está andando de bicicleta na rua."], "en", scope)[0].language
        == "pt_BR"
    )
    assert (
        auto_sources(detector, ["Ein Mann fährt mit dem Fahrrad die Straße entlang."], "en", scope)[
            0
        ].language
        == "deu"
    )


class DetectOnly:
    """A de -> en engine that /detect never asks for a translation."""

    src_lang, tgt_lang, beam_size, origin, parallel_batches = "de", "en", 1, "none", 1

    def count_pieces(self, lines: list[str]) -> list[int]:
        return [len(line.split()) + 1 for line in lines]

    directions = (("de", "en"),)

    def resolve(self, options: TranslateOptions) -> TranslateOptions:
        return options

    def translate(self, lines: Sequence[str], options: TranslateOptions, **_: object) -> list:
        raise AssertionError("/detect translated")


def test_text_in_several_languages_is_named_by_its_share_never_a_confident_stranger() -> None:
    # Whole, this text was Tagalog at 97.65: its n-grams fit no one language, and the sharpening
    # by length that suits one language made a confident answer of a flat one.
    greetings = "Hello world. Hallo Welt. Bonjour le monde. Hola mundo. Ciao mondo."
    thirds = "Zwei Hunde spielen im Schnee. Two dogs play in the snow. Deux chiens jouent dans la neige."
    mostly_german = (
        "Ein Mann steht auf einer Leiter. Er putzt die Fenster des Hauses. A man is standing on a ladder."
    )
    texts = [greetings, thirds, "\n".join(thirds.split(". ")), mostly_german, "Ja. Nein. Danke schön. Bitte."]
    app = create_app(DetectOnly(), Settings())

    async def scenario(http: httpx.AsyncClient) -> list[list[dict]]:
        return [(await http.post("/detect", json={"q": text}, timeout=120)).json() for text in texts]

    found = asyncio.run(in_process(app, scenario))
    assert found[0][0]["language"] in {"en", "de", "fr", "es", "it"} and found[0][0]["confidence"] < 50
    for answer in found[1:3]:  # a third each: the three languages, none above half
        assert {guess["language"] for guess in answer} == {"de", "en", "fr"}
        assert all(20 < guess["confidence"] < 50 for guess in answer), answer
    assert [guess["language"] for guess in found[3][:2]] == ["de", "en"]  # German, two thirds of it
    assert 50 < found[3][0]["confidence"] < 90 and 10 < found[3][1]["confidence"] < 50
    assert found[4] == [{"confidence": 100.0, "language": "de"}]  # one language, sentence after sentence


@pytest.fixture(scope="module")
def server(trained_run: Path) -> Iterator[ServeProcess]:
    running = start_server(trained_run)
    yield running
    assert running.stop() == 0
    assert "Traceback" not in "".join(running.stderr)


def test_english_to_a_de_en_server_is_named_and_refused_never_translated(server, trained_run, de_en) -> None:
    german = "Ein Mann fährt Fahrrad auf der Straße."
    expected = Translator.of(load_trained(trained_run), device="cpu").translate_lines([german])[0]
    with httpx.Client(timeout=120) as http:  # the first detection loads lingua's models
        detected = http.post(f"{server.url}/detect", json={"q": ENGLISH}).json()
        refused = http.post(f"{server.url}/translate", json={"q": ENGLISH, "source": "auto", "target": "en"})
        listed = http.post(
            f"{server.url}/translate", json={"q": [german, ENGLISH], "source": "auto", "target": "en"}
        )
        taken = http.post(
            f"{server.url}/translate", json={"q": german, "source": "auto", "target": "en"}
        ).json()
        digits = http.post(
            f"{server.url}/translate", data={"q": "42", "source": "auto", "target": "en"}
        ).json()
    assert detected == [guess.answer() for guess in detect(de_en, ENGLISH, DE_EN)]
    assert detected[0]["language"] == "en" and detected[0]["confidence"] > 90
    english = detected[0]["confidence"]
    message = f"q looks like English (en, confidence {english:.2f}): this model cannot translate from en"
    assert (refused.status_code, refused.json()) == (400, {"error": f"{message}; it translates de -> en"})
    assert listed.status_code == 400 and listed.json()["error"].startswith("q[1] looks like English (en, ")
    assert taken == {
        "translatedText": expected,
        "detectedLanguage": auto_sources(de_en, [german], "en", DE_EN)[0].answer(),
    }
    assert taken["detectedLanguage"]["language"] == "de"
    assert digits["detectedLanguage"] == {"confidence": 0.0, "language": "de"}


def test_the_many_to_english_server_answers_each_lines_own_language(
    many_to_english: Path, many_to_english_sentences: dict[str, str], many_to_en
) -> None:
    sentences = [many_to_english_sentences[lang] for lang in MANY_TO_ENGLISH_SOURCES]
    expected = Translator.of(load_trained(many_to_english), device="cpu").translate_lines(
        sentences, TranslateOptions(tgt_lang="en")
    )
    server = start_server(many_to_english)
    try:
        with httpx.Client(timeout=120) as http:
            auto = http.post(
                f"{server.url}/translate", json={"q": sentences, "source": "auto", "target": "en"}
            ).json()
            found = [http.post(f"{server.url}/detect", data={"q": line}).json()[0] for line in sentences]
    finally:
        assert server.stop() == 0
    assert auto["translatedText"] == expected
    assert [item["language"] for item in auto["detectedLanguage"]] == list(MANY_TO_ENGLISH_SOURCES)
    assert auto["detectedLanguage"] == found
    assert found == [detect(many_to_en, line, MANY_TO_EN)[0].answer() for line in sentences]
