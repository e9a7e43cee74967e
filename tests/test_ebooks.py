"""EPUB books built as zip and XML and reopened with lxml: the spine's XHTML content documents
translated in reading order, paragraphs between block elements, inline markup kept (each
translation in the text node its sentence began in), scripts, images and comments kept, every
chapter still well-formed XML, the navigation document, package document, styles and images
byte for byte; and once through a trained model, as ``mt translate -i x.epub`` translates it."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from helpers import XHTML, epub_file
from lxml import etree

import mt_cli
from mt_cli.documents import ebooks
from mt_cli.documents.packages import PackageDocument
from mt_cli.documents.sentences import segmenter

XHTML_NS = "{http://www.w3.org/1999/xhtml}"


def read(data: bytes) -> PackageDocument:
    return PackageDocument(data, ebooks.LAYOUT, "de", segmenter())


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def shape(xml: bytes) -> list[tuple[str, str | None]]:
    """Every element of a chapter in document order: (its local name, its class)."""
    return [
        (etree.QName(element).localname, element.get("class"))
        for element in etree.fromstring(xml).iter("{*}*")
    ]


def test_chapters_in_reading_order_keep_their_markup_and_stay_xml() -> None:
    source = epub_file()
    document = read(source)
    assert document.units == (
        "Kapitel eins",
        "Kapitel eins",
        "Ein Mann fährt Fahrrad.",
        "Zwei Hunde spielen.",
        "Eine Frau liest.",
        "Im Garten.",
        "Ein Bild hier.",
        "Kapitel zwei",
        "Ein Hund.",
        "Und eine Katze.",
    )
    result = document.rebuild([unit.upper() for unit in document.units])
    before, after = members(source), members(result)
    assert list(after) == list(before)
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"OEBPS/Text/eins.xhtml", "OEBPS/Text/zwei.xhtml"}
    chapter = after["OEBPS/Text/eins.xhtml"]
    assert shape(chapter) == shape(before["OEBPS/Text/eins.xhtml"])
    assert chapter.startswith(b'<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n<html')
    body = etree.fromstring(chapter).find(f"{XHTML_NS}body")
    paragraph = body.find(f"{XHTML_NS}p")
    assert paragraph.text == "EIN MANN FÄHRT FAHRRAD." and paragraph[0].text is None
    assert paragraph[0].tail == " ZWEI HUNDE SPIELEN." and paragraph[1].tail == "EINE FRAU LIEST."
    assert b'<script>var x = "Nein.";</script>' in chapter and b"<!-- Ein Kommentar. -->" in chapter
    assert b'alt="Ein Bild"' in chapter
    assert etree.fromstring(after["OEBPS/Text/zwei.xhtml"]).find(f"{XHTML_NS}body/{XHTML_NS}div").tail is None
    assert b"<div><p>EIN HUND.</p> UND EINE KATZE.</div>" in after["OEBPS/Text/zwei.xhtml"]
    first = zipfile.ZipFile(io.BytesIO(result)).infolist()[0]
    assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)


def test_svg_and_ruby_annotations_are_kept_and_the_text_around_them_flows() -> None:
    chapter = XHTML.format(
        title="T",
        body='<p>Eins <svg xmlns="http://www.w3.org/2000/svg"><text>Nein</text></svg>zwei.</p>'
        "<p><ruby>Kan<rt>kan</rt></ruby> ist gut.</p>",
    )
    document = read(epub_file({"a.xhtml": chapter}))
    assert document.units == ("T", "Eins zwei.", "Kan ist gut.")


def test_a_trained_model_translates_a_book(trained_run: Path) -> None:
    model = mt_cli.load(trained_run, device="cpu")
    source = epub_file()
    result = model.translate_file(source, "epub")
    expected = [translation.text for translation in model.translate(list(read(source).units))]
    before, after = members(source), members(result)
    for name in ("OEBPS/Text/eins.xhtml", "OEBPS/Text/zwei.xhtml"):
        assert shape(after[name]) == shape(before[name])  # well-formed, every element kept
    paragraph = etree.fromstring(after["OEBPS/Text/eins.xhtml"]).find(f"{XHTML_NS}body/{XHTML_NS}p")
    assert paragraph.text == expected[2] and paragraph[0].tail == " " + expected[3]
    assert after["OEBPS/content.opf"] == before["OEBPS/content.opf"]
