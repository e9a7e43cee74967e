"""Sentences across runs: a paragraph's sentences found in its runs' joined text, each translation
written into the run where its sentence began, the other runs emptied of it and kept; whitespace
pieces stay; mixed XML content read as text and tails."""

from __future__ import annotations

from lxml import etree

from mt_cli.documents.runs import Piece, mixed_pieces, put, spans_of, units_of
from mt_cli.documents.sentences import segmenter


def runs(*texts: str) -> tuple[list[Piece], list[str]]:
    """Pieces over a list of run texts ("\\t" a whitespace piece), and the texts as written."""
    written = list(texts)

    def writer(number: int):
        def write(value: str) -> None:
            written[number] = value

        return write

    return [Piece(text, None if text == "\t" else writer(n)) for n, text in enumerate(texts)], written


def test_a_translation_goes_where_its_sentence_began_and_every_run_stays() -> None:
    pieces, written = runs("Ein ", "Mann", " fährt. Zwei", "\t", "Hunde spielen.  ", "42")
    spans = spans_of(pieces, "de", segmenter())
    assert units_of(pieces, spans) == ["Ein Mann fährt.", "Zwei Hunde spielen."]
    put(pieces, spans, ["A man rides.", "Two dogs play."])
    assert written == ["A man rides.", "", " Two dogs play.", "\t", "  ", "42"]


def test_a_paragraph_without_a_letter_has_no_sentence() -> None:
    pieces, _ = runs("42", " ", "—")
    assert spans_of(pieces, "de", segmenter()) == []


def test_mixed_content_is_text_and_tails_with_inline_elements_and_spaces() -> None:
    paragraph = etree.fromstring("<p>Ein <b>Mann<i>!</i></b> fährt.<s/>Zwei <img/>Hunde.<!-- c --></p>")
    pieces = list(
        mixed_pieces(paragraph, lambda e: e.tag in ("b", "i"), lambda e: " " if e.tag == "s" else None)
    )
    assert "".join(piece.text for piece in pieces) == "Ein Mann! fährt. Zwei Hunde."
    spans = spans_of(pieces, "de", segmenter())
    assert units_of(pieces, spans) == ["Ein Mann! fährt.", "Zwei Hunde."]
    put(pieces, spans, ["A man! rides.", "Two dogs."])
    assert etree.tostring(paragraph, encoding="unicode") == (
        "<p>A man! rides.<b><i/></b><s/>Two dogs.<img/><!-- c --></p>"
    )
