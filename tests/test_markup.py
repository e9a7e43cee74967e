"""HTML as tokens: every character of any input kept in order (broken markup, bogus "<![",
skipped "</>" included), entities decoded, and each text's context (script, style, code, pre,
translate="no" and "yes", inline or block tags, the start tag an end tag closes). Hostile input
(issue 51): markup the input ends in, a bare "&#", quotes left open, NULs, raw text elements, and
a mebibyte of unfinished tags, read in one pass."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mt_cli.documents.markup import Kind, Token, tokenize

PIECES = [
    "<", ">", "!", "[", "]", "-", "?", "/", "a", " ", "\n", "=", '"', "'", "&", "#", ";", "é",
    "<![", "]]>", "<!--", "-->", "</>", "<b>", "</b>", "<p>", "</p>", "<br/>", "&amp;", "&nbsp",
    "&#65;", "&#x1F642", "<script>", "</script>", "<style>", "<span translate=no>", "</span>",
    "<!DOCTYPE html>", "<?xml ?>", "<![CDATA[x]]>", "<code>", "</code>", "Ein Hund.", "\0", "&#", "<a b='",
    '<a b="', "<title>", "</title>", "<xmp>", "</xmp>", "<!-->", "--!>", "&amplifier",
]  # fmt: skip


def kinds(source: str) -> list[tuple[Kind, str]]:
    return [(token.kind, token.raw) for token in tokenize(source)]


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


def test_a_bare_reference_start_is_text_and_the_tags_after_it_stay_tags() -> None:
    # html.parser read the rest of the page after "&#" as text: every later tag was lost
    tokens = tokenize("<p>Taste &# drücken, &#x oder &x;</p><p>Noch <b>ein</b> Satz&#33</p>")
    assert [(t.kind, t.raw) for t in tokens if t.kind is not Kind.TEXT] == [
        (Kind.START, "<p>"), (Kind.END, "</p>"), (Kind.START, "<p>"), (Kind.START, "<b>"),
        (Kind.END, "</b>"), (Kind.END, "</p>"),
    ]  # fmt: skip
    assert texts("Taste &# drücken, &#x oder &x;") == [("Taste &# drücken, &#x oder &x;", True)]
    assert [t.text for t in tokenize("&amplifier &notit; &#33")] == ["&", "lifier ", "¬", "it; ", "!"]


def test_markup_the_input_ends_in_is_kept_to_the_end_never_as_text() -> None:
    tails = [
        "<!-- Ein Kommentar. Noch einer", "<a href='x", "<script", "<!DOCTYPE html", "<![CDATA[ Ein Satz.",
        "<?php echo", "<!x", "<!", "</p", '<p title="x>Ein Satz.</p><p>', "<a\0 b",
    ]  # fmt: skip
    for tail in tails:
        assert tokenize("<p>Ein Satz.</p>" + tail)[3:] == [Token(Kind.OTHER, tail)], tail


def test_a_less_than_sign_that_starts_no_markup_is_text() -> None:
    for source in ["<", "</", "a < b", "4<5", "<3 dich", "<= 2", "<é>", "a <\n b"]:
        assert [token.kind for token in tokenize(source)] == [Kind.TEXT], source
        assert texts(source) == [(source, True)]


def test_a_quote_left_open_holds_the_markup_up_to_its_close_as_in_a_browser() -> None:
    source = '<p title="abc>Ein Satz.</p><p class="x">Zwei.</p><a title=\'1 > 2\' href=">">x</a>'
    assert kinds(source) == [
        (Kind.START, '<p title="abc>Ein Satz.</p><p class="x">'), (Kind.TEXT, "Zwei."), (Kind.END, "</p>"),
        (Kind.START, "<a title='1 > 2' href=\">\">"), (Kind.TEXT, "x"), (Kind.END, "</a>"),
    ]  # fmt: skip
    tags = ["<a b=c/>", "<a b='c'/>", "<a/b>", "<a =b>", "<a b= >", "<a b\n=\n'>'>"]
    assert [raw for _, raw in kinds("".join(tags))] == tags


def test_nul_characters_are_kept_and_are_never_text() -> None:
    assert kinds("Ein\0 Satz.<b\0>x\0\0</b>") == [
        (Kind.TEXT, "Ein"), (Kind.OTHER, "\0"), (Kind.TEXT, " Satz."), (Kind.START, "<b\0>"),
        (Kind.TEXT, "x"), (Kind.OTHER, "\0\0"), (Kind.END, "</b>"),
    ]  # fmt: skip


def test_comments_end_where_a_browser_ends_them() -> None:
    for comment in ["<!-->", "<!--->", "<!---->", "<!-- a --!>", "<!-- <p> -- -> -->", "<!--x>y-->"]:
        assert kinds(comment + "Hund") == [(Kind.OTHER, comment), (Kind.TEXT, "Hund")], comment
    # CDATA ends at "]]>" (as in SVG), else where HTML ends a bogus comment: at the next ">"
    assert kinds("<![CDATA[ a > b ]]>x<![CDATA[ y > z") == [
        (Kind.OTHER, "<![CDATA[ a > b ]]>"), (Kind.TEXT, "x"),
        (Kind.OTHER, "<![CDATA[ y >"), (Kind.TEXT, " z"),
    ]  # fmt: skip


def test_raw_text_elements_hold_text_up_to_their_end_tag() -> None:
    source = (
        "<script>if (a<b) x = '</p>';</SCRIPT ><title>A &amp; <b>B</b></title>"
        "<xmp><i>x</i></xmp><script/>y</script><style>p{}"
    )
    assert texts(source) == [
        ("if (a<b) x = '</p>';", False), ("A ", True), ("&", True), (" <b>B</b>", True),
        ("<i>x</i>", False), ("y", False), ("p{}", False),
    ]  # fmt: skip
    assert texts("<plaintext><p>Ein Satz.</plaintext>") == [("<p>Ein Satz.</plaintext>", False)]


@pytest.mark.parametrize("piece", ["<a ", "<a b='", "<!", "<![CDATA[>", "&#", "<a\0", "<", "<b>x "])
def test_a_hostile_page_is_read_in_one_pass(piece: str) -> None:
    # html.parser took 36 s for 60 KB of "<a " (and hours for 1 MiB): quadratic; this is linear
    source = piece * (2**20 // len(piece) if piece == "<a " else 2**18 // len(piece))
    started = time.perf_counter()
    assert "".join(token.raw for token in tokenize(source)) == source
    assert time.perf_counter() - started < 10
