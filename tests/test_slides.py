"""PowerPoint presentations built and reopened by python-pptx: every slide's and its notes'
sentences in the presentation's order, each translation in the run its sentence began in, every
run and its formatting kept, the parts without text byte for byte; and once through a trained
model, as ``mt translate -i x.pptx`` translates it."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pptx
import pytest
from helpers import slides_file, word_file

import mt_cli
from mt_cli.documents import slides
from mt_cli.documents.packages import PackageDocument
from mt_cli.documents.sentences import segmenter
from mt_cli.errors import InputError


def read(data: bytes) -> PackageDocument:
    return PackageDocument(data, slides.LAYOUT, "de", segmenter())


def runs(data: bytes) -> list[list[list[tuple[str, bool | None]]]]:
    """Each slide's paragraphs, each a list of its runs' (text, bold)."""
    return [
        [
            [(run.text, run.font.bold) for run in paragraph.runs]
            for shape in slide.shapes
            if shape.has_text_frame
            for paragraph in shape.text_frame.paragraphs
        ]
        for slide in pptx.Presentation(io.BytesIO(data)).slides
    ]


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_slides_and_notes_keep_their_runs_and_styles() -> None:
    source = slides_file()
    document = read(source)
    assert document.units == (
        "Ein Titel.",
        "Ein Mann fährt Fahrrad.",
        "Zwei Hunde.",
        "Eine Notiz.",
        "Zweite Folie.",
    )
    result = document.rebuild([unit.upper() for unit in document.units])
    assert runs(result) == [
        [[("EIN TITEL.", None)], [("EIN MANN FÄHRT FAHRRAD.", None), ("", True), (" ZWEI HUNDE.", None)]],
        [[("ZWEITE FOLIE.", None)]],
    ]
    notes = pptx.Presentation(io.BytesIO(result)).slides[0].notes_slide.notes_text_frame.text
    assert notes == "EINE NOTIZ."
    before, after = members(source), members(result)
    assert list(after) == list(before)
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"ppt/slides/slide1.xml", "ppt/slides/slide2.xml", "ppt/notesSlides/notesSlide1.xml"}


def test_slides_are_read_in_the_presentations_order_not_their_file_names() -> None:
    presentation = pptx.Presentation(io.BytesIO(slides_file()))
    order = presentation.slides._sldIdLst  # python-pptx's own list of slide ids
    order.append(order[0])  # the first slide moved last
    written = io.BytesIO()
    presentation.save(written)
    assert read(written.getvalue()).units[0] == "Zweite Folie."


def test_a_line_break_is_whitespace_and_a_field_is_text() -> None:
    presentation = pptx.Presentation()
    frame = presentation.slides.add_slide(presentation.slide_layouts[5]).shapes.title.text_frame
    frame.text = "Ein Hund\vläuft."  # \v: a line break (<a:br>) within the paragraph
    written = io.BytesIO()
    presentation.save(written)
    document = read(written.getvalue())
    assert document.units == ("Ein Hund läuft.",)
    assert runs(document.rebuild(["A dog runs."])) == [[[("A dog runs.", None), ("", None)]]]


def test_a_word_file_named_pptx_is_one_line() -> None:
    with pytest.raises(InputError) as found:
        read(word_file())
    assert str(found.value) == (
        "not a valid .pptx file: its main part word/document.xml is "
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
    )


def test_a_trained_model_translates_a_presentation(trained_run: Path) -> None:
    model = mt_cli.load(trained_run, device="cpu")
    source = slides_file()
    result = model.translate_file(source, "pptx")
    expected = [translation.text for translation in model.translate(list(read(source).units))]
    before, after = runs(source), runs(result)
    assert [[[bold for _, bold in paragraph] for paragraph in slide] for slide in after] == [
        [[bold for _, bold in paragraph] for paragraph in slide] for slide in before
    ]
    assert after[0][1][0][0] == expected[1] and after[0][1][1][0] == ""
    assert after[0][1][2][0] == " " + expected[2]
    assert after[1][0][0][0] == expected[4]
