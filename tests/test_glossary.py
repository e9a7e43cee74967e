"""text/glossary.py: the glossary file's rules, each bad line named, and term matching."""

from __future__ import annotations

from pathlib import Path

import pytest

from mt_cli.errors import DataError
from mt_cli.text.glossary import Glossary


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "terms.tsv"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_reads_its_entries_skipping_blank_and_comment_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, "# Fachbegriffe\nHund\thound\n\n  Mann \t man\nHund\thound\n")
    glossary = Glossary.read(path, "de", "en")
    assert glossary.entries == {"Hund": ("hound",), "Mann": ("man",)}
    assert len(glossary) == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Hund\thound\nKatze cat\n", r"terms.tsv line 2: 0 tabs; a glossary line is a source term"),
        ("Hund\thound\tdog\n", r"line 1: 2 tabs"),
        ("Hund\thound\n\t cat\n", r"line 2: the source term is empty"),
        ("Hund\t  \n", r"line 1: the target term is empty"),
        ("Hund\t...\n", r"line 1: the target term is empty \(or has no letter or digit\)"),
        ("Hund\tсобака\n", r"line 1: the target term 'собака' has 'с', a letter outside the latin script"),
        ("Hund\thound\nHund\tdog\n", r"line 2: 'Hund' is already translated as 'hound' on an earlier line"),
        ("Hund\tho\x07und\n", r"line 1: the target term holds a control character"),
    ],
)
def test_a_bad_line_is_one_error_naming_it(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(DataError, match=message) as caught:
        Glossary.read(_write(tmp_path, text), "de", "en")
    assert "\n" not in str(caught.value)


def test_a_missing_file_or_a_folder_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError):
        Glossary.read(tmp_path / "absent.tsv", "de", "en")
    with pytest.raises(DataError):
        Glossary.read(tmp_path, "de", "en")


def test_another_script_is_checked_only_for_languages_with_a_known_script(tmp_path: Path) -> None:
    glossary = Glossary.read(_write(tmp_path, "Hund\t狗\n"), "de", "zh")
    assert glossary.entries == {"Hund": ("狗",)}


def test_a_dictionary_may_give_a_term_several_targets(tmp_path: Path) -> None:
    path = _write(tmp_path, "Hund\tdog\nHund\thound\nHund\tdog\n")
    glossary = Glossary.read(path, "de", "en", several_targets=True)
    assert glossary.entries == {"Hund": ("dog", "hound")}
    assert [m.targets for m in glossary.find("Ein Hund.")] == [("dog", "hound")]


def _found(glossary: Glossary, sentence: str) -> list[tuple[str, str]]:
    return [(sentence[m.start : m.end], m.target) for m in glossary.find(sentence)]


def test_german_inflected_forms_match_their_term() -> None:
    glossary = Glossary({"Hund": ("hound",), "Mann": ("man",), "Mädchen": ("lass",)}, "de", "en")
    assert _found(glossary, "Zwei Hunde bellen den Männern nach.") == [("Hunde", "hound"), ("Männern", "man")]
    assert _found(glossary, "Des Mädchens Hundes") == [("Mädchens", "lass"), ("Hundes", "hound")]
    assert _found(glossary, "HUND und hund") == [("HUND", "hound"), ("hund", "hound")]


def test_a_short_word_with_an_ending_is_not_a_form_of_a_shorter_term() -> None:
    glossary = Glossary({"Ei": ("egg",)}, "de", "en")
    assert _found(glossary, "Ein Eis und ein Ei.") == [("Ei", "egg")]


def test_a_word_that_is_a_term_less_its_ending_is_not_a_form_of_it() -> None:
    glossary = Glossary({"Kanne": ("jug",), "Ente": ("duck",), "roter Ball": ("red ball",)}, "de", "en")
    assert _found(glossary, "Er kann zwei Kannen tragen.") == [("Kannen", "jug")]  # "kann" is a verb
    assert _found(glossary, "Enten, kein Ent.") == [("Enten", "duck")]
    assert _found(glossary, "mit einem roten Ball") == [("roten Ball", "red ball")]  # one stem, two endings


def test_the_longest_term_wins_and_matches_do_not_overlap() -> None:
    glossary = Glossary(
        {"Ball": ("ball",), "roter Ball": ("red ball",), "Ball spielen": ("play ball",)}, "de", "en"
    )
    assert _found(glossary, "Kinder mit einem roten Ball spielen.") == [("roten Ball", "red ball")]
    assert _found(glossary, "Sie wollen Ball spielen.") == [("Ball spielen", "play ball")]
    assert _found(glossary, "Ein Ball, ein roter Ball.") == [("Ball", "ball"), ("roter Ball", "red ball")]


def test_english_endings_match_and_other_languages_match_whole_words_case_folded() -> None:
    glossary = Glossary({"dog": ("Hund",), "walk": ("gehen",)}, "en", "de")
    assert _found(glossary, "Dogs walked a dog.") == [("Dogs", "Hund"), ("walked", "gehen"), ("dog", "Hund")]
    assert _found(Glossary({"chien": ("dog",)}, "fr", "en"), "Chiens et un CHIEN.") == [("CHIEN", "dog")]


def test_no_term_no_match_and_a_glossary_of_100000_entries_reads(tmp_path: Path) -> None:
    lines = "".join(f"Begriff{i}\tterm{i}\n" for i in range(100_000))
    glossary = Glossary.read(_write(tmp_path, lines), "de", "en")
    assert len(glossary) == 100_000
    assert glossary.find("Ein Hund läuft über die Wiese.") == []
    assert _found(glossary, "Der Begriff99999 steht am Ende.") == [("Begriff99999", "term99999")]
