"""Inline markup put into a translated sentence: same relative place, before or after a word as
it was glued in the source, inside punctuation, order kept, an element never left empty, and
the translation's own text escaped."""

from __future__ import annotations

from mt_cli.documents.inline import Atom, Glue, glue, place


def test_glue_follows_the_spaces_around_the_markup() -> None:
    opening = [glue("a", "b", False), glue(" ", "b", False), glue("a", " ", False), glue(" ", " ", False)]
    assert opening == [Glue.NEXT, Glue.NEXT, Glue.PREVIOUS, Glue.FREE]
    closing = [glue("a", ".", True), glue(" ", "b", True), glue("a", " ", True), glue(" ", " ", True)]
    assert closing == [Glue.PREVIOUS, Glue.NEXT, Glue.PREVIOUS, Glue.FREE]


def test_an_element_lands_on_the_words_at_the_same_place() -> None:
    # "Zwei große Hunde." with <b> around "große"
    atoms = (Atom(5, "<b>", Glue.NEXT), Atom(10, "</b>", Glue.PREVIOUS, 0))
    assert place("Two big dogs.", 17, atoms) == "Two <b>big</b> dogs."
    # the same translation once more, but the identity: every tag where it was
    assert place("Zwei große Hunde.", 17, atoms) == "Zwei <b>große</b> Hunde."


def test_a_link_on_the_last_word_ends_before_its_period() -> None:
    atoms = (Atom(16, '<a href="/w">', Glue.NEXT), Atom(21, "</a>", Glue.PREVIOUS, 0))
    assert place("He runs over the grass.", 22, atoms) == 'He runs over the <a href="/w">grass</a>.'


def test_an_element_keeps_a_word_and_the_order_of_markup_is_kept() -> None:
    # open and close would both snap to the first word's start: the close goes past the open
    atoms = (Atom(1, "<i>", Glue.NEXT), Atom(2, "</i>", Glue.PREVIOUS, 0), Atom(3, "<!--c-->", Glue.NEXT))
    assert place("Hello world", 40, atoms) == "<i>Hello</i> <!--c-->world"


def test_markup_between_spaces_goes_between_words_with_a_space() -> None:
    atoms = (Atom(4, "<code>mt train</code>", Glue.FREE),)
    assert place("Führe jetzt aus.", 9, atoms) == "Führe <code>mt train</code> jetzt aus."
    assert place("Done", 9, (Atom(8, "<img src=x>", Glue.FREE),)) == "Done <img src=x>"
    assert place("", 9, atoms) == "<code>mt train</code>"


def test_the_translation_is_escaped_but_the_markup_is_not() -> None:
    atoms = (Atom(4, '<a title="&amp;">', Glue.NEXT), Atom(5, "</a>", Glue.PREVIOUS, 0))
    assert place("1 < 2 & 3 > 2", 13, atoms) == '1 &lt; <a title="&amp;">2</a> &amp; 3 &gt; 2'
