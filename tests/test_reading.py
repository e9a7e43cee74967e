"""reading.py: UTF-8 lines split on "\\n" alone, streamed as they arrive, and every damaged,
truncated or missing file as one line naming it."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
from pathlib import Path

import pytest

from mt_cli.config.sections import DataConfig
from mt_cli.data.corpus import train_pairs
from mt_cli.disk.reading import batched, count_lines, open_bytes, read_lines, stream_file_lines, stream_lines
from mt_cli.documents.filetypes import FileFormat, read_file
from mt_cli.errors import DataError, InputError


def test_read_lines_splits_on_newline_only(tmp_path: Path) -> None:
    path = tmp_path / "a.txt.gz"
    with gzip.open(path, "wb") as handle:
        handle.write("\ufeffeins\r\nzwei\u2028halb\n\ndrei".encode())
    assert read_lines(path) == ["eins", "zwei\u2028halb", "", "drei"]
    assert count_lines(path) == 4
    with pytest.raises(DataError, match="is a directory"):
        read_lines(tmp_path)
    with pytest.raises(DataError, match="does not exist"):
        read_lines(tmp_path / "nope")


def test_stream_lines_yields_each_line_as_it_arrives_and_names_a_bad_one() -> None:
    stream = io.BytesIO("\ufeffEin Hund\r\n\n🐶 ✨\nGr".encode() + b"\xfc\xdfe\n")
    lines = stream_lines(stream, "standard input")
    assert [next(lines), next(lines), next(lines)] == ["Ein Hund", "", "🐶 ✨"]
    with pytest.raises(InputError, match=r"standard input is not UTF-8 \(line 4\)"):
        next(lines)


def test_stream_file_lines_reads_gzip_and_reports_a_truncated_file(tmp_path: Path) -> None:
    path = tmp_path / "in.de.gz"
    path.write_bytes(gzip.compress(("Zeile\n" * 1000).encode()))
    assert list(stream_file_lines(path)) == ["Zeile"] * 1000
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(DataError, match=r"in.de.gz is truncated \(the compressed data ends early\)"):
        list(stream_file_lines(path))
    assert count_lines(path) is None  # the reading itself says why


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda data: data[: len(data) // 2],
            r"is truncated \(the compressed data ends early\); copy it again",
        ),
        (lambda data: data[:-8] + bytes(4) + data[-4:], r"is damaged \(CRC check failed .*\); copy it again"),
        (lambda data: data[:10] + bytes(64) + data[74:], r"is damaged \(.*\); copy it again"),
        (gzip.decompress, r"is not gzip-compressed \(.*\); if it is plain text, drop the .gz ending"),
    ],
)
def test_every_reader_of_a_damaged_gzip_file_says_which_file(tmp_path: Path, damage, message: str) -> None:
    path = tmp_path / "train.de.gz"
    path.write_bytes(damage(gzip.compress("".join(f"Zeile {i}\n" for i in range(5000)).encode())))
    for read in (read_lines, lambda p: list(stream_file_lines(p)), lambda p: list(open_bytes(p))):
        with pytest.raises(DataError, match=f"^{tmp_path}/train.de.gz {message}$"):
            read(path)
    assert count_lines(path) is None


def test_batched_hands_on_full_chunks_then_the_rest() -> None:
    assert list(batched(iter("abcdefg"), 3)) == [["a", "b", "c"], ["d", "e", "f"], ["g"]]
    assert list(batched(iter([]), 3)) == []


UTF16_TEXT = "Ein Hund rennt durch den Park.\nZwei Katzen schlafen.\n"
UTF16 = {  # as Windows' editors and PowerShell's > write it: Latin text is valid UTF-8 without the mark
    "UTF-16LE": UTF16_TEXT.encode("utf-16-le"),
    "UTF-16BE": UTF16_TEXT.encode("utf-16-be"),
    "mark": UTF16_TEXT.encode("utf-16"),
    "Cyrillic": "Собака бежит по траве.\nКошка спит.\n".encode("utf-16-le"),
}


def utf16_message(name: str, kind: str) -> str:
    convert = "not UTF-8; convert it, e.g. with iconv -f {} -t UTF-8"
    if kind == "mark":
        return f"{name} is UTF-16 (it starts with a byte-order mark), " + convert.format("UTF-16")
    order = "UTF-16BE" if kind == "UTF-16BE" else "UTF-16LE"
    return f"{name} is UTF-16 without a byte-order mark ({order}), " + convert.format(order)


@pytest.mark.parametrize("kind", list(UTF16))
def test_utf16_text_is_refused_in_one_line_by_every_reader(tmp_path: Path, kind: str) -> None:
    data = UTF16[kind]
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    with pytest.raises(DataError) as err:
        read_lines(path)
    assert str(err.value) == utf16_message(str(path), kind)
    with pytest.raises(InputError) as err:
        list(stream_lines(io.BytesIO(data), "standard input"))
    assert str(err.value) == utf16_message("standard input", kind)
    if kind != "mark":  # after an empty first line, each line starts with its NUL: still told apart
        empty_first = "\n".encode("utf-16-be" if kind == "UTF-16BE" else "utf-16-le") + data
        with pytest.raises(InputError) as err:
            list(stream_lines(io.BytesIO(empty_first), "standard input"))
        assert str(err.value) == utf16_message("standard input", kind)
    for form in (FileFormat.TEXT, FileFormat.SRT, FileFormat.HTML):  # mt translate -i, /translate_file
        with pytest.raises(InputError) as err:
            read_file(data, form, "de", "letter.txt")
        assert str(err.value) == utf16_message("letter.txt", kind)


def test_utf8_text_with_a_mark_or_nul_free_scripts_still_reads(tmp_path: Path) -> None:
    text = "\ufeffEin Hund.\n犬が走る。\nСобака.\n"
    path = tmp_path / "in.txt"
    path.write_text(text, encoding="utf-8")
    assert read_lines(path) == ["Ein Hund.", "犬が走る。", "Собака."]
    assert list(stream_lines(io.BytesIO(text.encode()), "-")) == ["Ein Hund.", "犬が走る。", "Собака."]
    assert read_file(text.encode(), FileFormat.TEXT, "de").units[0] == "Ein Hund."


def test_mt_eval_and_a_files_corpus_refuse_utf16_files(tmp_path: Path) -> None:
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_bytes(UTF16["UTF-16LE"])
    ref.write_bytes(UTF16["UTF-16LE"])  # the same lines: a BLEU of 100 over garbage, before
    result = subprocess.run(
        [sys.executable, "-m", "mt_cli", "eval", "--hyp", str(hyp), "--ref", str(ref)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and result.stdout == "", result.stdout
    assert result.stderr == f"error: {utf16_message(str(hyp), 'UTF-16LE')}\n"
    src, tgt = tmp_path / "train.de", tmp_path / "train.en"
    src.write_bytes(UTF16["UTF-16BE"])
    tgt.write_text("A dog runs across the meadow.\nTwo cats sleep.\n")
    cfg = DataConfig(source="files", files={"train": [str(src), str(tgt)]})
    with pytest.raises(DataError) as err:
        list(train_pairs(cfg))
    assert str(err.value) == utf16_message(str(src), "UTF-16BE")
