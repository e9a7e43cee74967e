"""`mt translate --format`: text splits each line into sentences and keeps its whitespace, html
translates a page's text and keeps every tag, both the same as the Python API's documents; the
per-line options are refused with them, and bad input is one line."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import epub_file, odf_file, slides_file, word_file

import mt_cli

TEXT = "Ein Mann fährt Fahrrad.  Zwei Hunde spielen im Schnee!\n\n   Eine Frau liest.\n42\n"
PAGE = (
    '<!DOCTYPE html>\n<p class="a&amp;b">Ein <b>Mann</b> fährt Fahrrad. Zwei Hunde spielen.</p>\n'
    "<pre>Eine Frau liest.</pre><!-- Ein Kommentar. -->\n"
)


def mt(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mt_cli", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


@pytest.fixture(scope="module")
def model(trained_run: Path) -> mt_cli.Model:
    return mt_cli.load(trained_run, device="cpu")  # mt translate's engine, device and precision


def test_text_is_translated_sentence_by_sentence_as_the_api_does(trained_run, model, tmp_path) -> None:
    source = tmp_path / "in.txt"
    source.write_text(TEXT, encoding="utf-8")
    result = mt(
        "translate",
        "--run",
        str(trained_run),
        "--device",
        "cpu",
        "-f",
        "text",
        "-i",
        str(source),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr.decode()
    expected = model.translate_document(TEXT.removesuffix("\n")) + "\n"
    assert result.stdout.decode() == expected
    assert expected.endswith("\n42\n") and expected.count("\n") == TEXT.count("\n")
    assert "  " in expected.splitlines()[0] and expected.splitlines()[2].startswith("   ")


def test_html_from_stdin_and_a_file_keeps_its_markup(trained_run, model, tmp_path) -> None:
    expected = model.translate_document(PAGE, "html")
    assert expected.startswith('<!DOCTYPE html>\n<p class="a&amp;b">') and "<b>" in expected
    assert expected.endswith("</p>\n<pre>Eine Frau liest.</pre><!-- Ein Kommentar. -->\n")
    command = ["translate", "--run", str(trained_run), "--device", "cpu", "--format", "html"]
    piped = mt(*command, cwd=tmp_path, stdin=PAGE.encode())
    assert piped.returncode == 0 and piped.stdout.decode() == expected
    (tmp_path / "page.html").write_bytes(b"\xef\xbb\xbf" + PAGE.encode())  # a file's BOM is kept
    written = mt(*command, "-i", "page.html", "-o", "out.html", cwd=tmp_path)
    assert written.returncode == 0
    assert (tmp_path / "out.html").read_bytes() == b"\xef\xbb\xbf" + expected.encode()
    argument = mt(*command, "<p>Ein Hund.</p>", cwd=tmp_path)
    assert argument.stdout.decode() == model.translate_document("<p>Ein Hund.</p>", "html")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["-f", "html", "--n-best", "2"], "error: --n-best needs --format lines: --format html writes"),
        (["-f", "text", "--json"], "error: --json needs --format lines"),
        (["-f", "text", "--align"], "error: --align needs --format lines"),
        (["-f", "markdown"], "Invalid value for '--format' / '-f'"),
    ],
)
def test_per_line_options_need_lines(trained_run, tmp_path, options: list[str], message: str) -> None:
    result = mt("translate", "--run", str(trained_run), *options, "Ein Hund.", cwd=tmp_path)
    assert result.returncode == 2 and message in result.stderr.decode()


def test_html_that_is_not_utf8_is_one_line(trained_run, tmp_path) -> None:
    (tmp_path / "latin1.html").write_bytes("<p>\nGrüße</p>".encode("latin-1"))
    result = mt("translate", "--run", str(trained_run), "-f", "html", "-i", "latin1.html", cwd=tmp_path)
    lines = result.stderr.decode().strip().splitlines()
    assert result.returncode == 2 and lines == [
        "error: latin1.html is not UTF-8 (line 2); convert it, e.g. with iconv -t UTF-8"
    ]


SRT = (
    "1\n00:00:01,000 --> 00:00:02,500\nEin Mann fährt\nFahrrad.\n\n"
    "2\n00:00:03,000 --> 00:00:04,000\nZwei Hunde.\n"
)


def zip_entries(data: bytes) -> dict[str, bytes]:
    """Each entry of a zip archive by name: its content, without the times the archive holds."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_srt_and_docx_files_are_picked_by_extension_as_the_api_translates_them(trained_run, model, tmp_path):
    import docx

    (tmp_path / "x.srt").write_text(SRT, encoding="utf-8")
    document = docx.Document()
    paragraph = document.add_paragraph("Ein ")
    paragraph.add_run("Mann").bold = True
    paragraph.add_run(" fährt Fahrrad.")
    document.save(tmp_path / "x.docx")
    command = ["translate", "--run", str(trained_run), "--device", "cpu"]
    for name in ("x.srt", "x.docx"):
        result = mt(*command, "-i", name, "-o", f"y{name[1:]}", cwd=tmp_path)
        assert result.returncode == 0, result.stderr.decode()
        source = (tmp_path / name).read_bytes()
        written, expected = (tmp_path / f"y{name[1:]}").read_bytes(), model.translate_file(source, name[2:])
        if name.endswith(".docx"):  # a zip: its entries' times are the moment it was written
            written, expected = zip_entries(written), zip_entries(expected)
        assert written == expected
    subtitles = (tmp_path / "y.srt").read_text(encoding="utf-8").split("\n")
    assert subtitles[:2] == SRT.split("\n")[:2] and subtitles[4:6] == SRT.split("\n")[5:7]
    runs = docx.Document(io.BytesIO((tmp_path / "y.docx").read_bytes())).paragraphs[0].runs
    assert [run.bold for run in runs] == [None, True, None] and runs[1].text == ""
    to_terminal = mt(*command, "-i", "x.docx", cwd=tmp_path)
    assert to_terminal.returncode == 2
    assert (
        to_terminal.stderr.decode().strip()
        == "error: --format docx reads and writes files: give -i FILE.docx and -o OUT.docx"
    )


def test_office_files_and_books_are_picked_by_extension_or_format_and_hostile_ones_are_one_line(
    trained_run, model, tmp_path
) -> None:
    command = ["translate", "--run", str(trained_run), "--device", "cpu"]
    sources = {"x.odt": odf_file("text"), "x.pptx": slides_file(), "x.epub": epub_file()}
    for name, data in sources.items():
        (tmp_path / name).write_bytes(data)
        result = mt(*command, "-i", name, "-o", f"y{name[1:]}", cwd=tmp_path)
        assert result.returncode == 0, result.stderr.decode()
        assert (tmp_path / f"y{name[1:]}").read_bytes() == model.translate_file(data, name[2:])
    (tmp_path / "slides.bin").write_bytes(odf_file("presentation"))
    chosen = mt(*command, "-f", "odp", "-i", "slides.bin", "-o", "out.bin", cwd=tmp_path)
    assert chosen.returncode == 0, chosen.stderr.decode()
    assert (tmp_path / "out.bin").read_bytes() == model.translate_file(odf_file("presentation"), "odp")
    no_output = mt(*command, "-f", "epub", "-i", "x.epub", cwd=tmp_path)
    assert no_output.returncode == 2 and no_output.stderr.decode().strip() == (
        "error: --format epub reads and writes files: give -i FILE.epub and -o OUT.epub"
    )
    damaged = bytearray(word_file())  # word/document.xml's deflate data begins with an invalid block
    with zipfile.ZipFile(io.BytesIO(damaged)) as archive:
        member = archive.getinfo("word/document.xml")
    damaged[member.header_offset + 30 + len(member.filename) + len(member.extra)] = 0xFF
    (tmp_path / "bad.docx").write_bytes(bytes(damaged))
    present = sorted(path.name for path in tmp_path.iterdir())
    refused = mt(*command, "-i", "bad.docx", "-o", "out.docx", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.decode().strip().splitlines() == [
        "error: not a valid .docx file: word/document.xml is damaged "
        "(Error -3 while decompressing data: invalid block type)"
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == present  # no output, no temporary
