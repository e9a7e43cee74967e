"""OpenDocument texts and presentations built as zip and XML and reopened with lxml: headings,
paragraphs, list items, notes, page headers, text boxes and speaker notes translated sentence by
sentence, each translation in the span its sentence began in, every span and its style kept,
spaces, tabs and breaks kept, ``mimetype`` first and stored, the other members byte for byte; and
once through a trained model, as ``mt translate -i x.odt`` translates it."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from helpers import ODF_NAMESPACES, odf_file
from lxml import etree

import mt_cli
from mt_cli.documents import opendocument
from mt_cli.documents.packages import PackageDocument
from mt_cli.documents.sentences import segmenter

TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"


def read(data: bytes, layout=opendocument.TEXT) -> PackageDocument:
    return PackageDocument(data, layout, "de", segmenter())


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def paragraphs(data: bytes, part: str = "content.xml") -> list[list[tuple[str | None, str]]]:
    """Each paragraph or heading of ``part``: (its element's style or None for the paragraph's
    own text, the text) for its text and each span's, and the element's local name for others."""
    root = etree.fromstring(members(data)[part])
    found = []
    for paragraph in root.iter(f"{TEXT}p", f"{TEXT}h"):
        pieces: list[tuple[str | None, str]] = [(None, paragraph.text or "")]
        for child in paragraph:
            name = etree.QName(child).localname
            if name == "span":
                pieces.append((child.get(f"{TEXT}style-name"), child.text or ""))
            else:
                pieces.append((name, ""))
            pieces.append((None, child.tail or ""))
        found.append(pieces)
    return found


def test_a_text_keeps_its_spans_styles_and_whitespace() -> None:
    source = odf_file("text")
    document = read(source)
    assert document.units == (
        "Eine Überschrift.",
        "Ein Mann fährt Fahrrad.",
        "Zwei Hunde spielen.",
        "Ende",
        "Im Garten.",
        "Mit Notiz hier.",
        "Die Notiz.",
        "Kopf.",
    )
    result = document.rebuild([unit.upper() for unit in document.units])
    assert paragraphs(result)[:2] == [
        [(None, "EINE ÜBERSCHRIFT.")],
        [
            (None, "EIN MANN FÄHRT FAHRRAD."), ("T1", ""), (None, " ZWEI HUNDE SPIELEN."),
            ("s", ""), (None, ""), ("T2", ""), (None, ""), ("tab", ""), (None, "ENDE"),
        ],
    ]  # fmt: skip
    assert [len(paragraph) for paragraph in paragraphs(result)] == [
        len(paragraph) for paragraph in paragraphs(source)
    ]
    assert paragraphs(result, "styles.xml") == [[(None, "KOPF.")]]
    before, after = members(source), members(result)
    assert list(after) == list(before)
    assert {name for name in before if before[name] != after[name]} == {"content.xml", "styles.xml"}
    first = zipfile.ZipFile(io.BytesIO(result)).infolist()[0]
    assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)


def test_a_presentation_translates_its_text_boxes_and_notes() -> None:
    source = odf_file("presentation")
    document = read(source, opendocument.PRESENTATION)
    assert document.units == ("Ein Mann fährt Fahrrad.", "Eine Notiz.", "Zweite Folie.")
    result = document.rebuild(["A man rides a bike.", "A note.", "Second slide."])
    assert paragraphs(result) == [
        [(None, "A man rides a bike."), ("T1", ""), (None, "")],
        [(None, "A note.")],
        [(None, "Second slide.")],
        [(None, "")],
    ]
    assert members(result)["styles.xml"] == members(source)["styles.xml"]  # no header or footer


def test_spans_nested_in_links_and_spaces_counted_by_text_c() -> None:
    body = (
        '<office:text><text:p>Ein<text:s text:c="3"/><text:a xlink:href="https://x"><text:span '
        'text:style-name="T1">Hund</text:span> läuft</text:a>.<text:line-break/>Eine Katze.</text:p>'
        "</office:text>"
    )
    source = odf_file(
        "text", body.replace("<office:text>", '<office:text xmlns:xlink="http://www.w3.org/1999/xlink">')
    )
    document = read(source)
    assert document.units == ("Ein Hund läuft.", "Eine Katze.", "Kopf.")
    content = members(document.rebuild(["A dog runs.", "A cat.", "Head."]))["content.xml"].decode()
    assert '<text:p>A dog runs.<text:s text:c="3"/><text:a xlink:href="https://x">' in content
    assert '<text:span text:style-name="T1"/></text:a><text:line-break/>A cat.</text:p>' in content
    assert ODF_NAMESPACES.split()[0] in content  # the namespace prefixes as written


def test_a_trained_model_translates_a_text(trained_run: Path) -> None:
    model = mt_cli.load(trained_run, device="cpu")
    source = odf_file("text")
    result = model.translate_file(source, "odt")
    expected = [translation.text for translation in model.translate(list(read(source).units))]
    before, after = paragraphs(source), paragraphs(result)
    assert [[style for style, _ in paragraph] for paragraph in after] == [
        [style for style, _ in paragraph] for paragraph in before
    ]
    assert after[0] == [(None, expected[0])]
    assert after[1][0] == (None, expected[1]) and after[1][1] == ("T1", "")
    assert paragraphs(result, "styles.xml") == [[(None, expected[-1])]]
