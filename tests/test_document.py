"""A document's parts: units in order, each replaced by its translation, the rest kept; many
documents rebuilt from one batch's translations; a count that does not match is a bug, said so."""

from __future__ import annotations

import pytest

from mt_cli.documents.document import Document, Sentence, rebuild_all
from mt_cli.documents.inline import Atom, Glue


def test_units_are_replaced_in_order_and_the_rest_is_kept() -> None:
    document = Document((" <", Sentence("eins"), "|", Sentence("zwei"), "> "))
    assert document.units == ("eins", "zwei")
    assert document.rebuild(["one", "two"]) == " <one|two> "


def test_html_translations_are_escaped_and_get_their_markup() -> None:
    sentence = Sentence(
        "Ein großer Hund.", 16, (Atom(4, "<b>", Glue.NEXT), Atom(10, "</b>", Glue.PREVIOUS, 0))
    )
    assert Document((sentence,), html=True).rebuild(["A big dog."]) == "A <b>big</b> dog."
    assert Document((Sentence("x"),), html=True).rebuild(["a & <b>"]) == "a &amp; &lt;b&gt;"
    assert Document((Sentence("x"),)).rebuild(["a & <b>"]) == "a & <b>"  # plain text stays plain


def test_many_documents_share_one_batch() -> None:
    first, second, empty = (
        Document((Sentence("a"), " ", Sentence("b"))),
        Document((Sentence("c"),)),
        Document(("-",)),
    )
    assert rebuild_all([first, empty, second], ["A", "B", "C"]) == ["A B", "-", "C"]
    with pytest.raises(ValueError, match="2 translations for documents of 3"):
        rebuild_all([first, second], ["A", "B"])
    with pytest.raises(ValueError, match="4 translations for documents of 3"):
        rebuild_all([first, second], ["A", "B", "C", "D"])
