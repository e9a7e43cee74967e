"""SubRip subtitles read as documents: every number and timing line kept byte for byte, each
cue's text split into sentences (over its line break), and what is not SubRip one line naming it."""

from __future__ import annotations

import pytest

from mt_cli.documents.formats import DocumentFormat, read_documents
from mt_cli.errors import InputError

SRT = (
    "\ufeff1\r\n00:00:01,000 --> 00:00:02,500\r\nEin Mann fährt\r\nFahrrad. Zwei Hunde.\r\n\r\n"
    "2\n0:00:03.5 --> 0:00:04.25  X1:40\n- Eine Frau.\n- 42\n\n\n"
    "3\n00:00:05,000 --> 00:00:06,000\n\n"
)


def read(text: str):
    return read_documents([text], DocumentFormat.SRT, "de")[0]


def test_cue_text_is_split_into_sentences_and_everything_else_is_kept() -> None:
    document = read(SRT)
    assert document.units == ("Ein Mann fährt Fahrrad.", "Zwei Hunde.", "Eine Frau.")
    assert document.rebuild(["A", "B", "C"]) == (
        "\ufeff1\r\n00:00:01,000 --> 00:00:02,500\r\nA B\r\n\r\n"
        "2\n0:00:03.5 --> 0:00:04.25  X1:40\n- C\n- 42\n\n\n"
        "3\n00:00:05,000 --> 00:00:06,000\n\n"
    )
    assert read("").units == () and read("\n\n").rebuild([]) == "\n\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Hallo\n", "line 1 should be a cue number, not 'Hallo'"),
        ("1\nHallo\n", "line 2 should be a timing line"),
        ("1\n00:00:01,000 -> 00:00:02,000\nA\n", "line 2 should be a timing line"),
        ("1\n00:00:01,000 --> 00:00:02,000\nA\n\nB\n", "line 5 should be a cue number, not 'B'"),
        ("1", "line 2 should be a timing line"),
    ],
)
def test_what_is_not_subrip_is_one_line_naming_it(text: str, message: str) -> None:
    with pytest.raises(InputError, match="not a SubRip") as found:
        read(text)
    assert message in str(found.value) and "\n" not in str(found.value)
