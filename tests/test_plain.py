"""Plain text as sentences: each line split on its own, a one-sentence line one unit, and the
text put back with every character around the sentences (spaces, CR LF, blank lines) as it was."""

from __future__ import annotations

from mt_cli.documents.plain import read_text
from mt_cli.documents.sentences import segmenter

SEGMENT = segmenter()


def test_lines_are_split_into_sentences_and_put_back_around_their_translations() -> None:
    text = "Ein Mann fährt Rad.  Zwei Hunde spielen!\r\n\n  Eine Frau liest.\n123\n"
    document = read_text(text, "de", SEGMENT)
    assert document.units == ("Ein Mann fährt Rad.", "Zwei Hunde spielen!", "Eine Frau liest.")
    assert document.rebuild(["A man rides.", "Two dogs play!", "A woman reads."]) == (
        "A man rides.  Two dogs play!\r\n\n  A woman reads.\n123\n"
    )
    assert document.rebuild(list(document.units)) == text


def test_a_line_of_one_sentence_is_one_unit_and_no_sentence_crosses_a_line() -> None:
    lines = ["Ein Hund läuft über die Wiese.", "Ein Mann mit Hut", "steht am Fenster."]
    assert read_text("\n".join(lines), "de", SEGMENT).units == tuple(lines)


def test_a_text_without_letters_has_nothing_to_translate() -> None:
    for text in ["", "\n\n", " 42 ", "—"]:
        document = read_text(text, "de", SEGMENT)
        assert document.units == () and document.rebuild([]) == text
