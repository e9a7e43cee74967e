"""text/terms.py: terms annotated inline for training and for a user's glossary, and a run
trained with a dictionary."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import CONFIGS, FAST_TRAINING, quiet

from mt_cli.config.options import GlossaryMode, TranslateOptions
from mt_cli.config.recipe import load_config
from mt_cli.decode.engine import CardEngine
from mt_cli.decode.results import Hypothesis, Translation
from mt_cli.errors import InputError
from mt_cli.text.glossary import Glossary
from mt_cli.text.terms import END, MARKERS, TERM, TO, for_training, with_glossary

DICTIONARY = Glossary(
    {"Hund": ("dog", "hound"), "Ball": ("ball",), "roter Ball": ("red ball",), "Wiese": ("meadow",)},
    "de",
    "en",
)


def test_a_glossary_annotates_each_term_with_its_target_after_the_source_words() -> None:
    assert with_glossary("Zwei Hunde jagen einen roten Ball.", DICTIONARY) == (
        f"Zwei {TERM} Hunde {TO} dog {END} jagen einen {TERM} roten Ball {TO} red ball {END}."
    )
    assert with_glossary("Nichts davon.", DICTIONARY) == "Nichts davon."


def test_training_annotates_only_terms_whose_translation_the_reference_has() -> None:
    source, reference = "Ein Hund rennt über die Wiese.", "A hound runs across the grass."
    annotated = for_training(source, reference, DICTIONARY, 1.0, random.Random(0))
    assert annotated == f"Ein {TERM} Hund {TO} hound {END} rennt über die Wiese."  # no meadow in it
    assert for_training("Zwei Hunde.", "Two dogs.", DICTIONARY, 1.0, random.Random(0)) == (
        f"Zwei {TERM} Hunde {TO} dog {END}."  # "dogs" holds "dog"
    )


def test_training_hides_the_source_words_of_its_share_of_the_annotations() -> None:
    rng = random.Random(2)
    annotated = [for_training("Ein Hund.", "A dog.", DICTIONARY, 1.0, rng, 0.25) for _ in range(1000)]
    hidden = sum(line == f"Ein {TERM} {TO} dog {END}." for line in annotated)
    shown = sum(line == f"Ein {TERM} Hund {TO} dog {END}." for line in annotated)
    assert hidden + shown == 1000 and 200 < hidden < 300


def test_training_annotates_about_its_share_of_the_matches() -> None:
    rng = random.Random(1)
    annotated = [for_training("Ein Hund.", "A dog.", DICTIONARY, 0.3, rng) for _ in range(1000)]
    assert 250 < sum(TERM in line for line in annotated) < 350


@dataclass
class _Echo(CardEngine):
    """An engine that 'translates' a line into itself: what the model was given."""

    card: object = None
    src_tok: object = None
    tgt_tok: object = None

    def resolve(self, options: TranslateOptions) -> TranslateOptions:
        return options if options.tgt_lang else TranslateOptions(tgt_lang="en", glossary=options.glossary)

    def _translated(self, lines, options, warn, first_line):
        assert options.glossary is None  # the workers never get it: the sources carry the terms
        return [Translation(line, (Hypothesis(line, (), 0.0),)) for line in lines]


@dataclass
class _Tokens:
    tags: dict[str, int]

    def piece_id(self, piece: str) -> int:
        return 1  # UNK: no placeholder symbols


def test_an_engine_trained_with_terms_gets_annotated_sources_and_keeps_the_lines() -> None:
    engine = _Echo(src_tok=_Tokens({marker: 4 + i for i, marker in enumerate(MARKERS)}), tgt_tok=_Tokens({}))
    [translation] = engine.translate(["Ein Hund."], TranslateOptions(glossary=DICTIONARY, placeholders=False))
    assert translation.source == "Ein Hund."
    assert translation.text == f"Ein {TERM} Hund {TO} dog {END}."


def test_a_glossary_for_a_model_without_terms_or_into_another_language_is_refused() -> None:
    untrained = _Echo(src_tok=_Tokens({}), tgt_tok=_Tokens({}))
    with pytest.raises(InputError, match=r"needs a model trained with data.terms"):
        untrained.translate(["Ein Hund."], TranslateOptions(glossary=DICTIONARY, placeholders=False))
    trained = _Echo(src_tok=_Tokens({TERM: 4}), tgt_tok=_Tokens({}))
    french = Glossary({"Hund": ("chien",)}, "de", "fr")
    with pytest.raises(InputError, match=r"the glossary gives fr terms, but this translates into en"):
        trained.translate(["Ein Hund."], TranslateOptions(glossary=french, placeholders=False))


def test_mt_translate_glossary_with_a_model_without_terms_is_one_line_and_exit_2(
    trained_run: Path, tmp_path: Path
) -> None:
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("Hund\thound\n", encoding="utf-8")
    command = [sys.executable, "-m", "mt_cli", "translate", "--run", str(trained_run), "--device", "cpu"]
    done = subprocess.run(
        [*command, "--glossary", str(glossary), "Ein Hund."], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "error: a glossary needs a model trained with data.terms (its source tokenizer has no <term> "
        "symbol): train one with a dictionary, e.g. configs/multi30k-terms.yaml, or force the terms "
        "with --glossary-mode guarantee"
    ]
    glossary.write_text("Hund\thound\nKatze cat\n", encoding="utf-8")
    done = subprocess.run(
        [*command, "--glossary", str(glossary), "Ein Hund."], capture_output=True, text=True
    )
    assert done.returncode == 2 and "terms.tsv line 2: 0 tabs" in done.stderr


def test_a_run_with_terms_holds_the_markers_and_annotates_its_training_sources(tmp_path: Path) -> None:
    from mt_cli.data.prepare import prepare_corpus, tokenizer_sample
    from mt_cli.text.tokenizer import prepare_tokenizers

    dictionary = tmp_path / "dictionary.tsv"
    dictionary.write_text("Mann\tman\nHund\tdog\nFrau\twoman\nFrau\twife\n", encoding="utf-8")
    overrides = [
        "data.train_limit=400",
        "data.max_len=60",
        f"data.terms={dictionary}",
        "data.terms_share=1.0",
    ]
    cfg = load_config(CONFIGS / "tiny.yaml", [*FAST_TRAINING, *overrides])
    src_tok, tgt_tok = prepare_tokenizers(cfg, tmp_path, *tokenizer_sample(cfg), log=quiet)
    assert all(marker in src_tok.tags for marker in MARKERS) and TERM not in tgt_tok.tags
    logged: list[str] = []
    corpus = prepare_corpus(cfg, tmp_path, src_tok, tgt_tok, logged.append)
    annotated, sources = 0, 0
    for i in range(len(corpus)):
        src, tgt = corpus.text("src", i), corpus.text("tgt", i)
        for target in re.findall(rf"{TO} (\w+) {END}", src):
            assert target in tgt.lower()  # only where the reference has it
        annotated += src.count(TO)
        sources += TO in src
        assert TERM not in tgt
    assert annotated > 100
    said = re.search(
        r"train: (\d+) terms annotated in (\d+) of the sources read \(data.terms\)", "\n".join(logged)
    )
    dropped = 400 - len(corpus)  # the log counts the pairs read, before the filters
    assert said and annotated <= int(said[1]) <= annotated + 3 * dropped
    assert sources <= int(said[2]) <= sources + dropped


def test_a_request_glossary_is_an_object_or_tab_separated_lines_and_a_bad_one_a_400() -> None:
    from mt_cli.serve.errors import ApiError
    from mt_cli.serve.parse import GLOSSARY_ENTRIES, parse_glossary

    as_object, mode = parse_glossary({"glossary": {"Hund": "hound"}}, "de", "en")
    as_text, _ = parse_glossary({"glossary": "# terms\nHund\thound\n", "glossary_mode": "append"}, "de", "en")
    assert as_object == as_text and as_object is not None and as_object.entries == {"Hund": ("hound",)}
    assert hash(as_object) == hash(as_text)  # one batch and one cache for both
    assert mode is GlossaryMode.APPEND
    assert parse_glossary({"glossary_mode": "guarantee"}, "de", "en") == (None, GlossaryMode.GUARANTEE)
    assert (
        parse_glossary({}, "de", "en")[0] is None and parse_glossary({"glossary": ""}, "de", "en")[0] is None
    )
    for value, message in [
        ("Hund\thound\nKatze cat", "invalid request: glossary line 2: 0 tabs"),
        ({"Hund": 3}, "invalid request: glossary maps source terms to target terms, all strings"),
        (["Hund"], "invalid request: glossary is an object of terms or a text of tab-separated lines"),
        (
            "a\tb\n" * (GLOSSARY_ENTRIES + 1),
            f"invalid request: the glossary has {GLOSSARY_ENTRIES + 1} lines",
        ),
    ]:
        with pytest.raises(ApiError) as caught:
            parse_glossary({"glossary": value}, "de", "en")
        assert caught.value.status == 400 and str(caught.value).startswith(message)
    with pytest.raises(ApiError, match=r"glossary_mode always is not one of append, guarantee"):
        parse_glossary({"glossary_mode": "always"}, "de", "en")


def test_mt_serve_answers_a_glossary_for_a_model_without_terms_with_one_line_400(trained_run: Path) -> None:
    import httpx
    from helpers import start_server

    server = start_server(trained_run)
    try:
        body = {"q": "Ein Hund.", "source": "de", "target": "en", "glossary": {"Hund": "hound"}}
        answer = httpx.post(f"{server.url}/translate", json=body, timeout=60)
        assert answer.status_code == 400
        assert answer.json()["error"].startswith(
            "invalid request: a glossary needs a model trained with data.terms"
        )
        plain = httpx.post(f"{server.url}/translate", json={**body, "glossary": {}}, timeout=60)
        assert plain.status_code == 200
    finally:
        server.stop()


def test_a_missing_or_bad_term_dictionary_fails_before_the_tokenizers_train(tmp_path: Path) -> None:
    from mt_cli.data.prepare import tokenizer_sample
    from mt_cli.errors import DataError

    bad = tmp_path / "bad.tsv"
    bad.write_text("Hund\tdog\nKatze cat\n", encoding="utf-8")
    for path, message in [
        (tmp_path / "absent.tsv", r"absent.tsv does not exist$"),
        (bad, r"bad.tsv line 2: 0 tabs"),
    ]:
        cfg = load_config(CONFIGS / "tiny.yaml", [*FAST_TRAINING, f"data.terms={path}"])
        with pytest.raises(DataError, match=rf"^data.terms: .*{message}"):
            tokenizer_sample(cfg)
