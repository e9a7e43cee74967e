"""Sentence boundaries from sentencex: spans without their whitespace, abbreviations and
ordinals of each source language not taken for ends, pieces without a letter left out, and any
text at all split without losing a character (the input that made sentencex 1.0.32 panic too)."""

from __future__ import annotations

import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mt_cli.documents.sentences import has_letter, segmenter, sentence_spans

SEGMENT = segmenter()


def sentences(text: str, language: str) -> list[str]:
    return [text[start:end] for start, end in sentence_spans(text, language, SEGMENT)]


@pytest.mark.parametrize(
    ("language", "text", "expected"),
    [
        (
            "de",
            "Ein Mann fährt Fahrrad. Zwei Hunde spielen.",
            ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen."],
        ),
        ("de", "Er kam z. B. am 3. Mai. Dr. Müller auch!", ["Er kam z. B. am 3. Mai.", "Dr. Müller auch!"]),
        ("fr", "Il est 3 h. Ça va ?  Oui, etc. et toi.", ["Il est 3 h.", "Ça va ?", "Oui, etc. et toi."]),
        ("cs", "Muž běží, tj. rychle. Např. pes spí.", ["Muž běží, tj. rychle.", "Např. pes spí."]),
        ("en", "  Two dogs run.\tA man waits.  ", ["Two dogs run.", "A man waits."]),
        ("de", "Keine Grenze hier", ["Keine Grenze hier"]),
        # A digit-initial sentence after a word's period: sentencex's de and cs rules keep it joined.
        ("de", "Ein Dschungel. 2 Mädchen sitzen.", ["Ein Dschungel.", "2 Mädchen sitzen."]),
        ("cs", "Muž stojí u jezera. 3 děti si hrají.", ["Muž stojí u jezera.", "3 děti si hrají."]),
        ("de", "Siehe Abb. 3 und Nr. 5, ca. 20 Meter.", ["Siehe Abb. 3 und Nr. 5, ca. 20 Meter."]),
        ("de", "Es waren 20. 3 davon kamen.", ["Es waren 20. 3 davon kamen."]),
        ("de", "Ein Mann mit HAUS. 3 Leute.", ["Ein Mann mit HAUS. 3 Leute."]),
        # No stop: a capitalised article or number starts the next sentence in German and French.
        (
            "de",
            "Zwei Männer in einer Stadt Ein Kind sitzt Eine Frau",
            ["Zwei Männer in einer Stadt", "Ein Kind sitzt", "Eine Frau"],
        ),
        ("de", "Ein Mann, Die Frau läuft", ["Ein Mann, Die Frau läuft"]),  # after a comma: no cut
        ("de", "Das Auto Ein", ["Das Auto Ein"]),  # a word must follow
        ("fr", "Deux hommes dans une ville Un enfant joue", ["Deux hommes dans une ville", "Un enfant joue"]),
        ("fr", "Un homme à La Rochelle le matin", ["Un homme à La Rochelle le matin"]),
        ("cs", "Dva muži ve městě Muž běží", ["Dva muži ve městě Muž běží"]),
        ("en", "Two men in a city A child sits", ["Two men in a city A child sits"]),
    ],
)
def test_sentences_are_split_by_the_languages_rules(language: str, text: str, expected: list[str]) -> None:
    assert sentences(text, language) == expected


def test_spans_point_into_the_text_without_their_whitespace() -> None:
    text = " Ein Hund.  Zwei Katzen! "
    assert sentence_spans(text, "de", SEGMENT) == [(1, 10), (12, 24)]


def test_pieces_without_a_letter_are_no_sentences() -> None:
    assert sentences("2026. Ein Hund. 🙂 ...", "de") == ["Ein Hund."]
    assert sentences("  123  ", "de") == [] and sentences("", "de") == []
    assert has_letter("ž") and has_letter("犬") and not has_letter("3.14 !")


def test_a_line_break_or_a_wide_space_is_only_a_space() -> None:
    # sentencex 1.0.32 panics on a capital, a no-break space and a period in German; mt hands it
    # plain spaces, one for one, so the offsets still point into the text as it came.
    assert sentences("X\u00a0.", "de") == ["X\u00a0."]
    assert sentences("Ein Mann\nläuft. Zwei\u2003Hunde.", "de") == ["Ein Mann\nläuft.", "Zwei\u2003Hunde."]


@settings(max_examples=300, deadline=None, database=None)
@given(
    text=st.text(st.sampled_from(list("ab XY.!?\n\u00a0\u2028\u3000\"'«»„“()…0123ÄéŠž。🙂")), max_size=40),
    language=st.sampled_from(["de", "en", "fr", "cs", "xx"]),
)
def test_any_text_gives_ordered_spans_of_letters_without_whitespace_at_their_ends(text, language) -> None:
    spans = sentence_spans(text, language, SEGMENT)
    assert all(a < b <= c for (a, b), (c, _) in zip(spans, spans[1:]))
    for start, end in spans:
        piece = text[start:end]
        assert piece == piece.strip() and has_letter(piece)
    covered = "".join(text[start:end] for start, end in spans)
    assert sum(char.isalpha() for char in covered) == sum(char.isalpha() for char in text)


def test_without_sentencex_the_error_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from mt_cli.errors import InputError

    monkeypatch.setitem(sys.modules, "sentencex", None)  # an import of it fails, as if not installed
    with pytest.raises(InputError, match=re.escape('pip install -e ".[documents]"')):
        segmenter()
