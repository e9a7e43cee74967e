"""`mt serve`'s /translate_file and /download_file for real: a server process over a run trained by
`mt train`, sent files by httpx as LibreTranslate's clients send them (a multipart form), each
translated file equal to the Python API's ``translate_file`` of the same bytes (the engine's
translation of the same sentences in one batch); every refusal a 4xx that leaves nothing in the
server's directory, which is gone once the server stops."""

from __future__ import annotations

import io
import os
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import docx
import httpx
import pytest
from helpers import ServeProcess, epub_file, odf_file, slides_file, start_server, word_file

import mt_cli
from mt_cli.documents.filetypes import FileFormat
from mt_cli.serve.files import LOCK, MEDIA_TYPES, download_name

MAX_FILE = 60_000  # python-docx's empty document is 36 KB
PAIR = {"source": "de", "target": "en"}
SRT = (
    "1\r\n00:00:01,000 --> 00:00:02,500\r\nEin Mann fährt\r\nFahrrad. Zwei Hunde spielen.\r\n\r\n"
    "2\r\n00:00:03,000 --> 00:00:04,000 X1:40 X2:600\r\nEine Frau liest ein Buch.\r\n\r\n"
    "10\r\n0:00:05.5 --> 0:00:06.25\r\n\r\n"
    "11\r\n00:00:07,000 --> 00:00:08,000\r\n- Ein Hund.\r\n- Eine Katze.\r\n"
)
TEXT = "Ein Mann fährt Fahrrad.  Zwei Hunde spielen im Schnee!\n\n   Eine Frau liest.\n42\n"
PAGE = '<p class="a">Ein <b>Mann</b> fährt Fahrrad.</p><pre>Eine Frau.</pre>'


def rezipped(data: bytes, replaced: dict[str, bytes], added: tuple = ()) -> bytes:
    """``data`` with members ``replaced`` and (name, bytes) pairs ``added`` at its end."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for member in source.infolist():
            target.writestr(member, replaced.get(member.filename, source.read(member)))
        for name, content in added:
            target.writestr(name, content)
    return out.getvalue()


XXE = rezipped(
    odf_file(), {"content.xml": b'<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>'}
)
DEFLATE64 = re.sub(  # every member's method, in its local header and the central directory
    rb"(PK\x01\x02.{6}|PK\x03\x04.{4})\x08\x00",
    lambda found: found[1] + b"\x09\x00",
    slides_file(),
    flags=re.S,
)
OUTSIDE = rezipped(epub_file(), {}, (("../x", b"x"),))


@pytest.fixture(scope="module")
def model(trained_run: Path) -> mt_cli.Model:
    return mt_cli.load(trained_run, device="cpu")  # mt serve's engine, device and precision


@pytest.fixture(scope="module")
def temporary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("server-tmp")  # the server's TMPDIR: where its files go


@pytest.fixture(scope="module")
def server(trained_run: Path, temporary: Path) -> Iterator[ServeProcess]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(temporary))
        running = start_server(trained_run, "--max-file-size", str(MAX_FILE))
    yield running
    assert running.stop() == 0
    assert "Traceback" not in "".join(running.stderr)
    assert list(temporary.iterdir()) == []  # the files' directory is removed at shutdown


def stored(temporary: Path) -> list[str]:
    """The names in the server's files directory (one, made at startup), but for its lock."""
    (directory,) = [path for path in temporary.iterdir() if path.name.startswith("mt-serve-files-")]
    return sorted(path.name for path in directory.iterdir() if path.name != LOCK)


def post(server: ServeProcess, name: str, data: bytes, **fields: str) -> httpx.Response:
    with httpx.Client(timeout=120) as http:
        return http.post(
            f"{server.url}/translate_file", data={**PAIR, **fields}, files={"file": (name, data)}
        )


def download(url: str) -> httpx.Response:
    with httpx.Client(timeout=60) as http:
        return http.get(url)


@pytest.mark.parametrize(
    ("name", "form", "data"),
    [
        ("Übung talk.srt", "srt", SRT.encode()),
        ("notes.txt", "text", TEXT.encode()),
        ("page.HTM", "html", b"\xef\xbb\xbf" + PAGE.encode()),
        ("letter.docx", "docx", word_file()),
        ("deck.PPTX", "pptx", slides_file()),
        ("brief.odt", "odt", odf_file("text")),
        ("folien.odp", "odp", odf_file("presentation")),
        ("buch.epub", "epub", epub_file()),
    ],
    ids=["srt", "text", "html", "docx", "pptx", "odt", "odp", "epub"],
)
def test_each_format_round_trips_as_the_api_translates_it(server, model, temporary, name, form, data) -> None:
    answer = post(server, name, data)
    assert answer.status_code == 200, answer.text
    url = answer.json()["translatedFileUrl"]
    expected_name = download_name(name, "en")
    assert re.fullmatch(
        rf"{re.escape(server.url)}/download_file/[0-9a-f]{{32}}\.{re.escape(expected_name)}", url
    )
    assert stored(temporary) == [url.rsplit("/", 1)[1]]
    got = download(url)
    assert got.status_code == 200
    assert got.headers["content-disposition"] == f'attachment; filename="{expected_name}"'
    assert got.headers["content-type"] == MEDIA_TYPES[FileFormat(form)]
    assert got.content == model.translate_file(data, form)
    assert stored(temporary) == []  # removed by its download
    again = download(url)
    assert again.status_code == 404 and "downloaded" in again.json()["error"]


def test_names_are_made_safe_and_keep_the_extension() -> None:
    assert download_name("Übung talk.srt", "en") == "Ubung_talk_en.srt"
    assert download_name("../../etc/x.TXT", "en") == "x_en.txt"
    assert download_name("日本.docx", "en") == "file_en.docx"


def test_an_srt_keeps_every_number_and_timing_line_byte_for_byte(server) -> None:
    got = download(post(server, "a.srt", SRT.encode()).json()["translatedFileUrl"]).content.decode()
    source_cues, cues = SRT.split("\r\n\r\n"), got.split("\r\n\r\n")
    assert len(cues) == len(source_cues) == 4
    for source, translated in zip(source_cues, cues):
        assert translated.split("\r\n")[:2] == source.split("\r\n")[:2]  # number and timing, as sent
    # The first cue's sentence over its line break is one line, the next sentence after it on that
    # line; the last cue's two lines (a sentence each) stay two.
    assert len(cues[0].split("\r\n")) == 3 and len(cues[3].split("\r\n")) == 5
    assert cues[2] == source_cues[2] and got.endswith("\r\n")


def test_a_docx_keeps_its_runs_and_their_styles(server) -> None:
    source = docx.Document(io.BytesIO(word_file()))
    answer = post(server, "w.docx", word_file())
    result = docx.Document(io.BytesIO(download(answer.json()["translatedFileUrl"]).content))
    for before, after in zip(source.paragraphs, result.paragraphs, strict=True):
        assert [(run.bold, run.italic) for run in after.runs] == [
            (run.bold, run.italic) for run in before.runs
        ]
    runs = result.paragraphs[0].runs
    assert len(runs) == 5 and runs[0].text != "Ein " and runs[1].text == "" and runs[3].text == ""
    assert result.tables[0].cell(0, 0).text not in ("", "Eine Frau liest.")


@pytest.mark.parametrize(
    ("name", "data", "status", "message"),
    [
        ("bad.docx", b"PK\x03\x04 not a zip", 400, "not a valid .docx file"),
        ("xxe.odt", XXE, 400, "not a .odt file mt reads: content.xml declares a DTD"),
        ("deflate64.pptx", DEFLATE64, 400, "is compressed by method 9 (deflate64)"),
        ("outside.epub", OUTSIDE, 400, "it holds a file named '../x', outside its own folders"),
        ("bad.srt", b"1\nnot a timing\n", 400, "line 2 should be a timing line"),
        ("latin1.txt", "Grüße".encode("latin-1"), 400, "is not UTF-8 (line 1)"),
        ("utf16.txt", TEXT.encode("utf-16-le"), 400, "is UTF-16 without a byte-order mark (UTF-16LE)"),
        ("utf16.srt", SRT.encode("utf-16"), 400, "is UTF-16 (it starts with a byte-order mark)"),
        ("x.pdf", b"%PDF", 400, "file format not supported"),
        ("big.txt", b"Ein Hund. " * (MAX_FILE // 10 + 1), 413, f"over this server's {MAX_FILE} bytes"),
        ("huge.txt", b"Ein Hund. " * (MAX_FILE // 5), 413, "request body"),
    ],
    ids=["docx", "xxe", "deflate64", "outside", "srt", "latin1", "utf16", "utf16-bom", "pdf", "big", "huge"],
)
def test_a_bad_or_oversized_file_is_a_4xx_and_leaves_nothing(server, temporary, name, data, status, message):
    answer = post(server, name, data)
    assert answer.status_code == status and message in answer.json()["error"]
    assert stored(temporary) == []
    # Nothing else either: an upload spooled to a temporary file is removed with its request.
    assert [path.name.startswith("mt-serve-files-") for path in temporary.iterdir()] == [True]


def test_fields_keys_and_settings(server) -> None:
    assert post(server, "a.txt", b"Ein Hund.", target="fr").status_code == 400
    with httpx.Client(timeout=30) as http:
        no_file = http.post(f"{server.url}/translate_file", data=PAIR)
        settings = http.get(f"{server.url}/frontend/settings").json()
        unknown = http.get(f"{server.url}/download_file/..%2F..%2Fetc%2Fpasswd")
    assert no_file.status_code == 400 and no_file.json() == {
        "error": "invalid request: send the file as a multipart/form-data field named file"
    }
    assert settings["filesTranslation"] is True
    assert settings["supportedFilesFormat"] == [
        ".txt", ".html", ".htm", ".srt", ".docx", ".pptx", ".odt", ".odp", ".epub",
    ]  # fmt: skip
    assert unknown.status_code == 404


def test_files_off_is_a_403(trained_run: Path) -> None:
    running = start_server(trained_run, "--max-file-size", "0")
    try:
        answer = httpx.post(
            f"{running.url}/translate_file", data=PAIR, files={"file": ("a.txt", b"Ein Hund.")}
        )
        settings = httpx.get(f"{running.url}/frontend/settings").json()
    finally:
        assert running.stop() == 0
    assert answer.status_code == 403 and answer.json() == {
        "error": "Files translation are disabled on this server."
    }
    assert settings["filesTranslation"] is False and settings["supportedFilesFormat"] == []


def test_a_killed_servers_directory_is_removed_by_the_next_server(trained_run: Path, tmp_path: Path) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(tmp_path))
        killed = start_server(trained_run)
        killed.kill()  # SIGKILL: no shutdown, its directory stays
        killed.process.wait()
        (left,) = tmp_path.iterdir()
        assert left.name.startswith(f"mt-serve-files-{killed.process.pid}-")
        alive = tmp_path / f"mt-serve-files-{os.getpid()}-kept"  # a live process's: not touched
        alive.mkdir()
        other = tmp_path / "mt-serve-files-notapid"  # not a server's directory by its name
        other.mkdir()
        running = start_server(trained_run)
    try:
        names = {path.name for path in tmp_path.iterdir()}
    finally:
        assert running.stop() == 0
    assert left.name not in names and {alive.name, other.name} <= names
    assert len(names) == 3  # the two kept and the running server's own
