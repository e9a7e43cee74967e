"""Files by kind: the format an extension names, UTF-8 files with their BOM kept, and a file
that is not UTF-8 one line naming its line."""

from __future__ import annotations

import pytest

from mt_cli.documents.filetypes import FileFormat, format_of, read_file
from mt_cli.errors import InputError


def test_extensions_name_formats() -> None:
    assert [format_of(name) for name in ["a.txt", "b.HTML", "c.htm", "d.srt", "e.Docx", "f.pdf", "g"]] == [
        FileFormat.TEXT, FileFormat.HTML, FileFormat.HTML, FileFormat.SRT, FileFormat.DOCX, None, None,
    ]  # fmt: skip
    assert [format_of(name) for name in ["a.pptx", "b.ODT", "c.odp", "d.epub", "e.ppt", "f.doc"]] == [
        FileFormat.PPTX, FileFormat.ODT, FileFormat.ODP, FileFormat.EPUB, None, None,
    ]  # fmt: skip
    assert [form.value for form in FileFormat if form.binary] == ["docx", "pptx", "odt", "odp", "epub"]
    assert not FileFormat.SRT.binary


def test_text_files_keep_their_bom_and_line_ends() -> None:
    read = read_file("\ufeffEin Hund. Eine Katze.\r\n".encode(), FileFormat.TEXT, "de")
    assert read.units == ("Ein Hund.", "Eine Katze.")
    assert read.rebuild(["A dog.", "A cat."]) == "\ufeffA dog. A cat.\r\n".encode()
    page = read_file(b"<p>Ein <b>Hund</b>.</p>", FileFormat.HTML, "de")
    assert page.rebuild(["A dog."]).startswith(b"<p>")


def test_a_file_that_is_not_utf8_is_one_line() -> None:
    with pytest.raises(InputError) as found:
        read_file("Ein Hund.\nGrüße".encode("latin-1"), FileFormat.SRT, "de", "x.srt")
    assert str(found.value) == "x.srt is not UTF-8 (line 2); convert it, e.g. with iconv -t UTF-8"
