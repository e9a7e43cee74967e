"""HTML as tokens: every character of any input kept in order (broken markup, bogus "<![",
skipped "</>" included), entities decoded, and each text's context (script, style, code, pre,
translate="no" and "yes", inline or block tags, the start tag an end tag closes)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mt_cli.documents.markup import Kind, tokenize

PIECES = [
    "<", ">", "!", "[", "]", "-", "?", "/", "a", " ", "\n", "=", '"', "'", "&", "#", ";", "é",
    "<![", "]]>", "<!--", "-->", "</>", "<b>", "</b>", "<p>", "</p>", "<br/>", "&amp;", "&nbsp",
    "&#65;", "&#x1F642", "<script>", "</script>", "<style>", "<span translate=no>", "</span>",
    "<!DOCTYPE html>", "<?xml ?>", "<![CDATA[x]]>", "<code>", "</code>", "Ein Hund.",
]  # fmt: skip


def texts(source: str) -> list[tuple[str, bool]]:
    return [(token.text, token.translatable) for token in tokenize(source) if token.kind is Kind.TEXT]


@settings(max_examples=400, deadline=None, database=None)
@given(st.lists(st.sampled_from(PIECES), max_size=25).map("".join))
def test_the_tokens_of_any_input_are_the_input(source: str) -> None:
    assert "".join(token.raw for token in tokenize(source)) == source


def test_bogus_markup_is_kept_as_written() -> None:
    for source in ["<![ab x", "a<![&ifb>c", "x</>y", "<![CDATA[x]]>", "a < b && c > d", "&#x;&;"]:
        assert "".join(token.raw for token in tokenize(source)) == source
    assert [token.kind for token in tokenize("x</>y")] == [Kind.TEXT, Kind.OTHER, Kind.TEXT]


def test_entities_are_decoded_and_their_source_kept() -> None:
    tokens = [t for t in tokenize("gro&szlig;&nbsp;&#65;&#x42;&amp") if t.kind is Kind.TEXT]
    assert "".join(t.text for t in tokens) == "groß\u00a0AB&"
    assert [t.raw for t in tokens] == ["gro", "&szlig;", "&nbsp;", "&#65;", "&#x42;", "&amp"]


def test_text_is_translated_except_where_html_says_not_to() -> None:
    source = (
        "<p>a<script>if (x<y) b</script><style>p{}</style><code>c</code><pre>d</pre>"
        '<div translate="no">e<span translate="yes">f</span><span>g</span></div>h'
        '<kbd translate="yes">i</kbd><textarea>j</textarea><b>k</b></p>'
    )
    assert texts(source) == [
        ("a", True), ("if (x<y) b", False), ("p{}", False), ("c", False), ("d", False), ("e", False),
        ("f", True), ("g", False), ("h", True), ("i", False), ("j", False), ("k", True),
    ]  # fmt: skip


def test_inline_tags_do_not_break_text_and_an_end_tag_knows_its_start() -> None:
    tokens = tokenize("<div><b><i>x</b></i><br>y<a href=q>z</a></div>")
    breaks = {token.raw: token.breaks for token in tokens if token.kind is not Kind.TEXT}
    assert breaks == {
        "<div>": True, "<b>": False, "<i>": False, "</b>": False, "</i>": False,
        "<br>": True, "<a href=q>": False, "</a>": False, "</div>": True,
    }  # fmt: skip
    partners = {tokens[i].raw: tokens[i].partner for i in range(len(tokens)) if tokens[i].kind is Kind.END}
    assert partners == {"</b>": 1, "</i>": None, "</a>": 8, "</div>": 0}  # </b> closed <i> too


def test_deep_nesting_stays_fast() -> None:
    source = "<b>" * 50_000 + "x" + "</i>" * 50_000
    assert len(tokenize(source)) == 100_001
