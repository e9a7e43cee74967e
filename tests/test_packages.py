"""Hostile packages, for every zip-based format: zip bombs (bytes, members, XML elements, text),
damaged deflate data, encrypted members and files, other compression methods, DTDs and entities
(XXE, billion laughs), paths outside the package and names given twice, each one line naming
what is wrong; and a package rewritten with its other members byte for byte."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
import warnings
import zipfile
from collections.abc import Callable

import pytest
from helpers import epub_file, odf_file, slides_file, word_file

from mt_cli.documents.filetypes import FileFormat, read_file
from mt_cli.documents.packages import MAX_ELEMENTS, MAX_MEMBERS, MAX_TEXT, MAX_UNPACKED, Package
from mt_cli.errors import InputError

FORMATS: dict[str, tuple[Callable[[], bytes], str]] = {  # a valid file, and an XML part with text
    "docx": (word_file, "word/document.xml"),
    "pptx": (slides_file, "ppt/slides/slide1.xml"),
    "odt": (lambda: odf_file("text"), "content.xml"),
    "odp": (lambda: odf_file("presentation"), "content.xml"),
    "epub": (epub_file, "OEBPS/Text/eins.xhtml"),
}
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def refusal(data: bytes, form: str) -> str:
    with pytest.raises(InputError) as found:
        read_file(data, FileFormat(form), "de")
    return str(found.value)


def rezipped(data: bytes, replaced: dict[str, bytes] | None = None, added: tuple = ()) -> bytes:
    """``data`` with members ``replaced`` and (name, bytes) pairs ``added`` at its end."""
    replaced = replaced or {}
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for member in source.infolist():
            target.writestr(member, replaced.get(member.filename, source.read(member)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile's "Duplicate name"
            for name, content in added:
                target.writestr(name, content, zipfile.ZIP_DEFLATED)
    return out.getvalue()


def patched(data: bytes, name: str, offset: int, value: bytes) -> bytes:
    """``data`` with the field at ``offset`` of member ``name``'s local header (``offset + 2`` of
    its central directory entry) set to ``value``."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        local = archive.getinfo(name).header_offset
    out = bytearray(data)
    out[local + offset : local + offset + len(value)] = value
    position = data.find(b"PK\x01\x02")
    while position >= 0:
        length = struct.unpack_from("<H", data, position + 28)[0]
        if data[position + 46 : position + 46 + length] == name.encode():
            out[position + offset + 2 : position + offset + 2 + len(value)] = value
        position = data.find(b"PK\x01\x02", position + 4)
    return bytes(out)


def damaged(data: bytes, name: str) -> bytes:
    """``data`` with the first byte of member ``name``'s deflate data made an invalid block type."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        local = archive.getinfo(name).header_offset
    names, extra = struct.unpack_from("<HH", data, local + 26)
    out = bytearray(data)
    out[local + 30 + names + extra] = 0xFF
    return bytes(out)


@pytest.mark.parametrize("form", FORMATS)
def test_damaged_encrypted_and_deflate64_members_are_one_line(form: str) -> None:
    build, part = FORMATS[form]
    data = build()
    assert refusal(damaged(data, part), form) == (
        f"not a valid .{form} file: {part} is damaged (Error -3 while decompressing data: invalid block type)"
    )
    assert refusal(patched(data, part, 6, b"\x01\x00"), form) == (
        f"not a .{form} file mt reads: {part} is encrypted; save it without a password"
    )
    assert refusal(patched(data, part, 8, b"\x09\x00"), form) == (
        f"not a .{form} file mt reads: {part} is compressed by method 9 (deflate64); "
        "only stored and deflated files are read"
    )


XXE = '<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>'
LAUGHS = (
    '<!DOCTYPE r [<!ENTITY a "aaaaaaaaaa">'
    + "".join(f'<!ENTITY {chr(98 + n)} "{("&" + chr(97 + n) + ";") * 10}">' for n in range(9))
    + "]><r>&j;</r>"
)


@pytest.mark.parametrize("form", FORMATS)
@pytest.mark.parametrize("xml", [XXE, LAUGHS], ids=["xxe", "billion laughs"])
def test_a_dtd_is_refused_and_no_entity_read(form: str, xml: str) -> None:
    build, part = FORMATS[form]
    assert refusal(rezipped(build(), {part: xml.encode()}), form) == (
        f"not a .{form} file mt reads: {part} declares a DTD, which mt refuses (entities could read files)"
    )


def test_xhtml_may_name_a_dtd_that_declares_nothing_but_office_xml_none() -> None:
    xhtml_1_1 = (
        '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" "http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">'
    )
    chapter = f'{xhtml_1_1}<html xmlns="http://www.w3.org/1999/xhtml"><body><p>Ein Hund.</p></body></html>'
    book = read_file(epub_file({"a.xhtml": chapter}), FileFormat.EPUB, "de")
    assert book.units == ("Ein Hund.",)
    assert xhtml_1_1.encode() in zipfile.ZipFile(io.BytesIO(book.rebuild(["A dog."]))).read("OEBPS/a.xhtml")
    plain = rezipped(word_file(), {"word/document.xml": f"<!DOCTYPE w:document><w:document {W}/>".encode()})
    assert refusal(plain, "docx").endswith(
        "word/document.xml declares a DTD, which mt refuses (entities could read files)"
    )


def test_too_many_elements_or_characters_are_refused_while_parsing() -> None:
    paragraphs = f"<w:document {W}><w:body>{'<w:p/>' * MAX_ELEMENTS}</w:body></w:document>"
    bomb = rezipped(word_file(), {"word/document.xml": paragraphs.encode()})
    assert len(bomb) < 100_000
    assert refusal(bomb, "docx") == f"not a .docx file mt reads: its XML holds over {MAX_ELEMENTS} elements"
    half = "a" * (MAX_TEXT // 2 + 1)
    runs = f"<w:r><w:t>{half}</w:t><w:t>{half}</w:t></w:r>"
    text = f"<w:document {W}><w:body><w:p>{runs}</w:p></w:body></w:document>"
    long = rezipped(word_file(), {"word/document.xml": text.encode()})
    assert (
        refusal(long, "docx")
        == f"not a .docx file mt reads: its XML holds over {MAX_TEXT} characters of text"
    )


# 14 million empty paragraphs in a .docx of about 80 KB: what raised a server to 2.25 GB.
MEMORY = """
import io, resource, sys, zipfile
sys.path.insert(0, "tests")
from helpers import word_file
from mt_cli.documents.filetypes import FileFormat, read_file
from mt_cli.errors import InputError
out = io.BytesIO()
source = zipfile.ZipFile(io.BytesIO(word_file()))
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
    for member in source.infolist():
        if member.filename != "word/document.xml":
            target.writestr(member, source.read(member))
    with target.open("word/document.xml", "w") as part:
        part.write(b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>')
        for _ in range(140):
            part.write(b"<w:p/>" * 100_000)
        part.write(b"</w:body></w:document>")
data = out.getvalue()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    read_file(data, FileFormat.DOCX, "de")
except InputError as err:
    print(len(data), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before, err)
"""


def test_millions_of_empty_paragraphs_hold_little_memory() -> None:
    found = subprocess.run([sys.executable, "-c", MEMORY], capture_output=True, text=True, timeout=120)
    size, grown_kib, message = found.stdout.split(" ", 2)
    assert int(size) < 200_000 and message.strip().endswith(f"over {MAX_ELEMENTS} elements"), found.stderr
    assert int(grown_kib) < 400 << 10  # KiB: the 1,000,000 elements parsed before the refusal


def test_a_zip_bomb_and_too_many_members_are_refused_before_unpacking() -> None:
    lying = patched(word_file(), "word/document.xml", 22, struct.pack("<I", MAX_UNPACKED))
    assert refusal(lying, "docx").startswith("not a .docx file mt reads: it unpacks to ")
    assert refusal(lying, "docx").endswith(f" bytes, over {MAX_UNPACKED}")
    crowded = rezipped(word_file(), added=tuple((f"x/{n}", b"") for n in range(MAX_MEMBERS)))
    assert refusal(crowded, "docx") == (
        f"not a .docx file mt reads: it holds {MAX_MEMBERS + 18} files, over {MAX_MEMBERS}"
    )


@pytest.mark.parametrize("form", FORMATS)
@pytest.mark.parametrize(
    ("added", "message"),
    [
        ("../evil.txt", "it holds a file named '../evil.txt', outside its own folders"),
        ("/etc/evil", "it holds a file named '/etc/evil', outside its own folders"),
        ("a/../../evil", "it holds a file named 'a/../../evil', outside its own folders"),
        ("C:/evil", "it holds a file named 'C:/evil', outside its own folders"),
        ("..\\evil", "it holds a file named '..\\\\evil', outside its own folders"),
        ("{part}", "it holds two files named '{part}'"),
        ("{upper}", "it holds two files named '{upper}'"),
    ],
    ids=["dot-dot", "absolute", "inner dot-dot", "drive", "backslash", "twice", "twice by case"],
)
def test_paths_outside_the_package_and_names_given_twice_are_refused(form, added, message) -> None:
    build, part = FORMATS[form]
    upper = part.upper()
    name = added.format(part=part, upper=upper)
    expected = f"not a .{form} file mt reads: " + message.format(part=part, upper=upper)
    assert refusal(rezipped(build(), added=((name, b"x"),)), form) == expected


def test_encrypted_office_and_odf_files_and_drm_books_are_one_line() -> None:
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(500)  # what Word saves with a password
    assert refusal(ole, "docx") == (
        "not a .docx file mt reads: it is encrypted (or an old binary Office file); "
        "save it without a password"
    )
    manifest = (
        '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">'
        '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml">'
        '<manifest:encryption-data manifest:checksum-type="SHA1/1K"/></manifest:file-entry>'
        "</manifest:manifest>"
    )
    locked = rezipped(odf_file(), {"META-INF/manifest.xml": manifest.encode()})
    assert refusal(locked, "odt") == "not a .odt file mt reads: it is encrypted; save it without a password"
    encryption = (
        '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:CipherData>'
        '<enc:CipherReference URI="OEBPS/Text/zwei.xhtml"/></enc:CipherData></enc:EncryptedData></encryption>'
    )
    drm = rezipped(epub_file(), added=(("META-INF/encryption.xml", encryption.encode()),))
    assert (
        refusal(drm, "epub")
        == "not a .epub file mt reads: its text is encrypted (DRM); mt reads only books without it"
    )


@pytest.mark.parametrize(
    ("form", "data", "message"),
    [
        ("odt", odf_file("presentation"),
         "its mimetype is 'application/vnd.oasis.opendocument.presentation', "
         "not application/vnd.oasis.opendocument.text"),
        ("epub", rezipped(epub_file(), {"mimetype": b"application/zip"}),
         "its mimetype is 'application/zip', not application/epub+zip"),
        ("odp", rezipped(odf_file("presentation"), {"content.xml": b"<a><b></a>"}),
         "content.xml is not well-formed XML "
         "(Opening and ending tag mismatch: b line 1 and a, line 1, column 11)"),
        ("epub", rezipped(epub_file(), {"META-INF/container.xml": b"<container/>"}),
         "META-INF/container.xml names no package document"),
        ("pptx", rezipped(slides_file(), {"ppt/_rels/presentation.xml.rels": b"<Relationships/>"}),
         "ppt/presentation.xml lists a slide its relationships do not name"),
    ],
    ids=["odp as odt", "epub mimetype", "broken xml", "no opf", "slide not named"],
)  # fmt: skip
def test_a_package_that_is_not_its_format_is_one_line(form: str, data: bytes, message: str) -> None:
    assert refusal(data, form) == f"not a valid .{form} file: {message}"


def test_a_rewritten_package_copies_every_other_member_and_puts_mimetype_first_and_stored() -> None:
    source = rezipped(odf_file(), added=(("zz/extra.bin", bytes(range(256))),))
    shuffled = io.BytesIO()  # mimetype last and deflated, as some tools write it
    with zipfile.ZipFile(io.BytesIO(source)) as archive, zipfile.ZipFile(shuffled, "w") as target:
        for member in [*archive.infolist()[1:], archive.infolist()[0]]:
            target.writestr(member.filename, archive.read(member), zipfile.ZIP_DEFLATED)
    package = Package(shuffled.getvalue(), ".odt")
    written = zipfile.ZipFile(io.BytesIO(package.rebuild({"content.xml": b"<new/>"}, first="mimetype")))
    first = written.infolist()[0]
    assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)
    with zipfile.ZipFile(io.BytesIO(source)) as original:
        for name in original.namelist():
            expected = b"<new/>" if name == "content.xml" else original.read(name)
            assert written.read(name) == expected
