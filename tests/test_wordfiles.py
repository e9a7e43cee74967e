"""Word documents built and reopened by python-docx: every paragraph's sentences (body, tables,
headers), each translation in the run its sentence began in, every run and its formatting kept,
every other member byte for byte (a part no relationship names too), and a file that is no Word
document one line. Hostile packages of every format are test_packages.py's."""

from __future__ import annotations

import io
import time
import zipfile

import docx
import pytest
from helpers import slides_file, word_file

from mt_cli.documents import wordfiles
from mt_cli.documents.packages import PackageDocument
from mt_cli.documents.sentences import segmenter
from mt_cli.errors import InputError


def read(data: bytes) -> PackageDocument:
    return PackageDocument(data, wordfiles.LAYOUT, "de", segmenter())


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_sentences_go_into_their_first_run_and_every_run_keeps_its_style() -> None:
    document = read(word_file())
    assert document.units == (
        "Ein Mann fährt Fahrrad.",
        "Zwei Hunde spielen.",
        "Ende",
        "Im Tisch.",
        "Hallo.",
        "Kopf.",
    )
    result = docx.Document(io.BytesIO(document.rebuild([unit.upper() for unit in document.units])))
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
        document.rebuild(["a", "b"])


def with_members(data: bytes, extra: dict[str, bytes]) -> bytes:
    """``data`` with ``extra`` members added at its end."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for member in source.infolist():
            target.writestr(member, source.read(member))
        for name, content in extra.items():
            target.writestr(name, content, zipfile.ZIP_DEFLATED)
    return out.getvalue()


def test_only_the_parts_with_text_change_and_a_part_no_relationship_names_is_kept() -> None:
    orphans = {"word/orphan.xml": b"<x>Nicht \xc3\xbcbersetzt.</x>", "custom/blob.bin": bytes(range(256))}
    source = with_members(word_file(), orphans)
    document = read(source)
    before, after = members(source), members(document.rebuild([unit.upper() for unit in document.units]))
    assert list(after) == list(before)  # the same members, in the same order
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"word/document.xml", "word/header1.xml"}
    assert after["word/document.xml"].startswith(b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>')


def redated(data: bytes, date: tuple[int, ...]) -> bytes:
    """``data`` with every member dated ``date``."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for member in source.infolist():
            target.writestr(zipfile.ZipInfo(member.filename, date), source.read(member))
    return out.getvalue()


def test_a_file_translated_twice_is_the_same_bytes_dated_as_its_source(monkeypatch) -> None:
    source = redated(word_file(), (2001, 2, 3, 4, 5, 6))
    document = read(source)
    first = document.rebuild(document.units)
    clock = time.time()
    monkeypatch.setattr(time, "time", lambda: clock + 3600)  # no clock in the bytes
    assert document.rebuild(document.units) == first
    with zipfile.ZipFile(io.BytesIO(first)) as written:
        assert {member.date_time for member in written.infolist()} == {(2001, 2, 3, 4, 5, 6)}
        assert written.infolist()[0].compress_type == zipfile.ZIP_STORED  # as redated wrote it


def zip_of(members: dict[str, bytes]) -> bytes:
    written = io.BytesIO()
    with zipfile.ZipFile(written, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return written.getvalue()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"PK\x03\x04 not a zip", "not a valid .docx file: File is not a zip file"),
        (b"", "not a valid .docx file: File is not a zip file"),
        (zip_of({"a.txt": b"x"}), "not a valid .docx file: it has no [Content_Types].xml"),
        (word_file()[: len(word_file()) // 2], "not a valid .docx file: File is not a zip file"),
        (
            slides_file(),
            "not a valid .docx file: its main part ppt/presentation.xml is "
            "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml",
        ),
        (
            zip_of({"[Content_Types].xml": b"<Types/>", "_rels/.rels": b"<Relationships/>"}),
            "not a valid .docx file: _rels/.rels names no main document",
        ),
    ],
    ids=["garbage", "empty", "other zip", "cut", "a presentation", "no main part"],
)
def test_what_is_no_word_document_is_one_line(data: bytes, message: str) -> None:
    with pytest.raises(InputError) as found:
        read(data)
    assert str(found.value) == message
