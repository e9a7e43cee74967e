"""HTML translated and put back: a suite of fragments and pages (nested inline tags, attributes,
entities, script and style, code and pre, translate="no", comments, a doctype, broken and
unclosed markup, bogus declarations), each translated by a fake that upper-cases and appends
markup characters. Checked by parsing both input and output with two parsers (lxml's libxml2
and Python's html.parser): the same elements, attributes, comments and declarations in the same
order, the untranslated text the same, only translated text changed, its "<&>" escaped. Hostile
pages (issue 51): markup the input ends in, a bare "&#", quotes left open, NULs, and pages of a
mebibyte whose inline markup is 100,000 deep, each with its markup kept byte for byte."""

from __future__ import annotations

import time
from html.parser import HTMLParser

import lxml.etree
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mt_cli.documents.markup import UNTRANSLATED, Kind, tokenize
from mt_cli.documents.pages import read_html
from mt_cli.documents.sentences import segmenter

SEGMENT = segmenter()
SUFFIX = " <&>"  # every fake translation ends with it: it must come back as text, escaped

FRAGMENTS = {
    "nested inline tags": (
        '<p>Ein <b>großer <i>brauner</i></b> Hund läuft über die <a href="/wiese?x=1&amp;y=2" '
        'title="Die Wiese">Wiese</a>. Zwei <em>Kinder</em> spielen.</p>'
    ),
    "attributes": "<div class='a b' data-x=\"&quot;q&quot;\" hidden id=x>Zwei Kinder spielen im Park.</div>",
    "entities": "<p>Fisch &amp; Chips kosten 5&nbsp;&euro;. Das ist &lt;billig&gt; &#x263A;.</p>",
    "script and style": (
        "<style>p { color: red; } /* Ein Satz. */</style><p>Ein Mann singt.</p>"
        '<script>if (a < b && c) { alert("Hallo Welt. Ein Satz."); }</script>'
    ),
    "translate no": (
        '<p>Ich heiße <span translate="no">Anna Schmidt</span>. Sie wohnt in Berlin.</p>'
        '<div translate="no"><p>Nicht übersetzen.</p><p translate="yes">Doch übersetzen.</p></div>'
    ),
    "code and pre": "<p>Führe <code>mt train</code> aus.</p><pre>Ein Satz.\n  Zwei Sätze.</pre>",
    "a page": (
        '<!DOCTYPE html>\n<html lang="de">\n<head><meta charset="utf-8"><title>Ein Titel</title></head>\n'
        "<body>\n<!-- Ein Kommentar. -->\n<h1>Eine Überschrift</h1>\n<ul>\n  <li>Ein Apfel.</li>\n"
        "  <li>Zwei Birnen und\n      drei Äpfel.</li>\n</ul>\n</body>\n</html>\n"
    ),
    "broken markup": "<p>Ein Hund <b>läuft<i> schnell.</b></i> Eine Katze <span>schläft.</p></div> Ende.",
    "unclosed and unknown tags": "<ul><li>Ein Apfel.<li>Zwei Birnen</ul><p>Text <x-tag y=1>mit</x-tag> Tags",
    "void and self-closing tags": 'Zeile eins.<br>Zeile zwei.<br/><img src="a.png" alt=Bild> Ein Bild.<hr>',
    "a table": "<table><tr><td>Ein Mann.</td><td>Eine Frau.</td></tr></table>",
    "upper case and bogus declarations": "<P CLASS=X>Ein Hund.</P><![CDATA[ kein Text ]]><!x Ein Hund. >",
    "markup across sentences": "<p>Das ist <b>gut. Sehr</b> gut. <i>Ein</i> Hund.</p>",
}


def translated(source: str, suffix: str = SUFFIX) -> tuple[str, tuple[str, ...]]:
    """``source`` translated by the fake (upper case, then ``suffix``), and its units."""
    document = read_html(source, "de", SEGMENT)
    return document.rebuild([unit.upper() + suffix for unit in document.units]), document.units


class Events(HTMLParser):
    """Python's parser's view: every tag with its attributes, comment and declaration in order,
    and the text of untranslated elements."""

    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self.markup: list[tuple] = []
        self.kept: list[str] = []
        self.open: list[str] = []
        self.feed(source)
        self.close()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.markup.append(("start", tag, tuple(attrs)))
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self.markup.append(("end", tag))
        if tag in self.open:
            del self.open[len(self.open) - 1 - self.open[::-1].index(tag) :]

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self.markup.append(("start-end", tag, tuple(attrs)))

    def handle_data(self, data: str) -> None:
        if any(tag in UNTRANSLATED for tag in self.open):
            self.kept.append(data)

    def handle_comment(self, data: str) -> None:
        self.markup.append(("comment", data))

    def handle_decl(self, data: str) -> None:
        self.markup.append(("decl", data))

    def unknown_decl(self, data: str) -> None:
        self.markup.append(("unknown", data))


def lxml_view(source: str) -> tuple[list[tuple], list[str], list[str]]:
    """libxml2's tree: (each node's tag, attributes, comment text), the text of untranslated
    elements, and all the text."""
    root = lxml.etree.fromstring(source, lxml.etree.HTMLParser())
    nodes, kept, texts = [], [], []
    for node in root.iter():
        if isinstance(node, lxml.etree._Comment):
            nodes.append(("comment", node.text))
        else:
            nodes.append((node.tag, sorted(node.attrib.items())))
            untranslated = [n for n in node.iterancestors()] + [node]
            if any(n.tag in UNTRANSLATED or n.get("translate") == "no" for n in untranslated):
                if not any(n.get("translate") == "yes" for n in untranslated):
                    kept.append(node.text or "")
        texts += [node.text or "", node.tail or ""]
    return nodes, kept, texts


@pytest.mark.parametrize("name", list(FRAGMENTS))
def test_the_markup_is_the_inputs_with_only_text_changed(name: str) -> None:
    source = FRAGMENTS[name]
    output, units = translated(source)
    assert units, "a fragment with nothing to translate proves nothing"
    before, after = Events(source), Events(output)
    assert after.markup == before.markup
    assert after.kept == before.kept
    nodes, kept, _ = lxml_view(source)
    out_nodes, out_kept, out_texts = lxml_view(output)
    assert out_nodes == nodes and out_kept == kept
    assert "".join(out_texts).count(SUFFIX.strip()) == len(units)  # each translation came back as text
    assert output.count("&lt;&amp;&gt;") == len(units)


def test_sentences_are_grouped_across_inline_tags_and_split_at_blocks() -> None:
    assert translated(FRAGMENTS["nested inline tags"])[1] == (
        "Ein großer brauner Hund läuft über die Wiese.",
        "Zwei Kinder spielen.",
    )
    assert translated(FRAGMENTS["a page"])[1] == (
        "Ein Titel",
        "Eine Überschrift",
        "Ein Apfel.",
        "Zwei Birnen und drei Äpfel.",  # the source's line break and indent are one space
    )
    assert translated(FRAGMENTS["void and self-closing tags"])[1] == (
        "Zeile eins.",
        "Zeile zwei.",
        "Ein Bild.",
    )
    assert translated(FRAGMENTS["translate no"])[1] == (
        "Ich heiße .",
        "Sie wohnt in Berlin.",
        "Doch übersetzen.",
    )


def test_the_output_reads_as_a_person_expects() -> None:
    assert translated(FRAGMENTS["nested inline tags"], "")[0] == (
        '<p>EIN <b>GROSSER <i>BRAUNER</i></b> HUND LÄUFT ÜBER DIE <a href="/wiese?x=1&amp;y=2" '
        'title="Die Wiese">WIESE</a>. ZWEI <em>KINDER</em> SPIELEN.</p>'
    )
    assert translated(FRAGMENTS["entities"])[0] == (
        "<p>FISCH &amp; CHIPS KOSTEN 5 €. &lt;&amp;&gt; DAS IST &lt;BILLIG&gt; ☺. &lt;&amp;&gt;</p>"
    )  # the model reads a sentence's spaces as one plain space, no-break ones too


@pytest.mark.parametrize("name", ["nested inline tags", "attributes", "script and style", "a table"])
def test_translating_into_the_same_words_gives_the_same_page(name: str) -> None:
    document = read_html(FRAGMENTS[name], "de", SEGMENT)
    assert document.rebuild(list(document.units)) == FRAGMENTS[name]


def test_a_page_with_nothing_to_translate_comes_back_as_it_was() -> None:
    for source in ["", "<p> </p>", "<p>42</p>", "<script>Ein Satz.</script>", "<!-- Ein Satz. -->"]:
        document = read_html(source, "de", SEGMENT)
        assert document.units == () and document.rebuild([]) == source


def kept(page: str) -> list[str]:
    """Everything of ``page`` but its translated text, token by token, as written (NULs one by
    one: two that a translation puts at one place are one token)."""
    tokens = [token for token in tokenize(page) if token.kind is not Kind.TEXT or not token.translatable]
    return [piece for token in tokens for piece in (token.raw if token.raw[0] == "\0" else [token.raw])]


HOSTILE = {
    "a bare &#": "<p>Taste &# drücken.</p><p>Noch <b>ein</b> Satz.</p>",
    "an unclosed comment": "<p>Ein Satz.</p>\n<!-- Ein Kommentar. Noch einer",
    "an unclosed tag": "<p>Ein Satz.</p><p>Zwei <a href='x>Hunde.",
    "an unclosed script": "<p>Ein Satz.</p><script>var x = 'Ein Satz.';",
    "an unclosed CDATA": "<p>Ein Satz.</p><![CDATA[ Ein Satz. Noch",
    "a doctype without its >": "<!DOCTYPE html <p>Ein Satz.</p><!DOCTYPE",
    "an end tag's start at the end": "<p>Ein Satz.</p></",
    "a quote left open": '<p title="abc>Ein Satz.</p><p class="x">Zwei Sätze.</p><p title=\'',
    "less-than signs": "<p>Ein Hund < eine Katze, 4<5 und <3.</p><p>Ein Satz <",
    "NULs": "<p>Ein\0 Hund\0 läuft.</p><b\0>Eine Katze.</b>\0",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_page_keeps_every_tag_and_untranslated_text(name: str) -> None:
    source = HOSTILE[name]
    output, units = translated(source)
    assert units and kept(output) == kept(source)
    assert "\0" not in "".join(units) and not any("<" in unit and ">" in unit for unit in units)


def test_a_bare_reference_start_and_an_unclosed_comment_are_read_as_a_browser_reads_them() -> None:
    assert translated(HOSTILE["a bare &#"], "") == (
        "<p>TASTE &amp;# DRÜCKEN.</p><p>NOCH <b>EIN</b> SATZ.</p>",
        ("Taste &# drücken.", "Noch ein Satz."),
    )  # html.parser made the rest of the page after "&#" one text, its tags translated as words
    assert translated(HOSTILE["an unclosed comment"], "") == (
        "<p>EIN SATZ.</p>\n<!-- Ein Kommentar. Noch einer",
        ("Ein Satz.",),
    )  # a comment to the end, as in a browser: html.parser translated it
    assert translated(HOSTILE["NULs"], "")[0] == "<p>EIN\0 HUND\0 LÄUFT.</p><b\0>EINE KATZE.</b>\0"


def test_a_reference_to_no_character_never_runs_into_the_translation() -> None:
    # "&#xE" (a control character) is text that stands for nothing: kept before "Ein" it would
    # have read "&#xEE", another character; the sentence it touches replaces it
    assert translated("<p>a&#xEin Hund. &#xE&#1Ein Satz&#xE</p> &#xE", "") == (
        "<p>AIN HUND. EIN SATZ</p> &#xE",
        ("ain Hund.", "Ein Satz"),
    )


PIECES = [
    "Ein Hund läuft.", "Zwei Katzen", " ", "\n", "<p>", "</p>", "<b>", "</b>", "<a href='x>'>", "</a>",
    "<!--", "-->", "&#", "&amp;", "&nbsp", "<", "</", ">", "\0", "<script>", "</script>", "<title>",
    "</title>", '"', "'", "=", "<![CDATA[", "]]>", "<br>", "<span translate=no>", "</span>", "<code>",
    "</code>", "<!DOCTYPE html>", "<!", "x<y", "<i", "</i>",
]  # fmt: skip


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(st.sampled_from(PIECES), max_size=20).map("".join))
def test_any_page_keeps_every_tag_and_untranslated_text(source: str) -> None:
    assert kept(translated(source)[0]) == kept(source)


def test_a_page_of_tags_100_000_deep_is_read_and_rebuilt_in_linear_time() -> None:
    # 100,000 <b> in one sentence: placing each against every word of the translation took hours
    source = "<b>Hund " * 100_000
    started = time.perf_counter()
    output, units = translated(source)
    assert time.perf_counter() - started < 60
    assert kept(output) == kept(source) and len(units) == 1


def test_a_line_of_5000_words_without_tags_is_one_sentence() -> None:
    output, units = translated("<p>" + "Wort " * 5000 + "</p>")
    assert (
        units == (" ".join(["Wort"] * 5000),) and output == "<p>" + units[0].upper() + " &lt;&amp;&gt; </p>"
    )
