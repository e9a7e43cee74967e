"""Word documents read by python-docx: every paragraph's sentences (body, tables, headers), each
translation in the run its sentence began in, every run and its formatting kept, and a file that
is no Word document one line."""

from __future__ import annotations

import io
import time
import zipfile

import docx
import pytest
from helpers import word_file

from mt_cli.documents.sentences import segmenter
from mt_cli.documents.wordfiles import MAX_UNPACKED, WordDocument
from mt_cli.errors import InputError


def test_sentences_go_into_their_first_run_and_every_run_keeps_its_style() -> None:
    read = WordDocument(word_file(), "de", segmenter())
    assert read.units == (
        "Ein Mann fährt Fahrrad.",
        "Zwei Hunde spielen.",
        "Ende",
        "Im Tisch.",
        "Hallo.",
        "Kopf.",
    )
    result = docx.Document(io.BytesIO(read.rebuild([unit.upper() for unit in read.units])))
    runs = [(run.text, run.bold, run.italic) for run in result.paragraphs[0].runs]
    assert runs == [
        ("EIN MANN FÄHRT FAHRRAD.", None, None),
        ("", True, None),
        (" ZWEI HUNDE SPIELEN.", None, None),
        ("", None, True),
        ("\tENDE", None, None),
    ]
    assert result.paragraphs[1].text == "42"
    assert result.tables[0].cell(0, 0).text == "IM TISCH. HALLO."
    assert result.sections[0].header.paragraphs[0].text == "KOPF."
    with pytest.raises(ValueError, match="2 translations for a document of 6 sentences"):
        read.rebuild(["a", "b"])


def zip_of(members: dict[str, bytes]) -> bytes:
    written = io.BytesIO()
    with zipfile.ZipFile(written, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return written.getvalue()


def redated(data: bytes, date: tuple[int, ...]) -> bytes:
    """``data`` with every member dated ``date``."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for member in source.infolist():
            target.writestr(zipfile.ZipInfo(member.filename, date), source.read(member))
    return out.getvalue()


def test_a_file_translated_twice_is_the_same_bytes_dated_as_its_source(monkeypatch) -> None:
    source = redated(word_file(), (2001, 2, 3, 4, 5, 6))
    read = WordDocument(source, "de", segmenter())
    first = read.rebuild(read.units)
    clock = time.time()
    monkeypatch.setattr(time, "time", lambda: clock + 3600)  # python-docx dates members by the clock
    assert read.rebuild(read.units) == first
    with zipfile.ZipFile(io.BytesIO(first)) as written:
        assert {member.date_time for member in written.infolist()} == {(2001, 2, 3, 4, 5, 6)}
        assert written.infolist()[0].compress_type == zipfile.ZIP_DEFLATED


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"PK\x03\x04 not a zip", "not a valid .docx file: File is not a zip file"),
        (b"", "not a valid .docx file"),
        (zip_of({"a.txt": b"x"}), "not a valid .docx file"),
        (word_file()[: len(word_file()) // 2], "not a valid .docx file"),
        (zip_of({"zeros": bytes(MAX_UNPACKED + 1)}), f"over {MAX_UNPACKED}"),
    ],
    ids=["garbage", "empty", "other zip", "cut", "zip bomb"],
)
def test_what_is_no_word_document_is_one_line(data: bytes, message: str) -> None:
    with pytest.raises(InputError, match="docx") as found:
        WordDocument(data, "de", segmenter())
    assert message in str(found.value) and "\n" not in str(found.value)
