"""The formats a document may come in, and reading many documents for one batch.

``read_documents`` reads each text of one request (or one file) in its format; the caller
translates the ``units`` of all of them in one engine call (``Document.units``, in order) and
gives the translations back to ``document.rebuild_all``.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from mt_cli.documents.document import Document
from mt_cli.documents.pages import read_html
from mt_cli.documents.plain import read_text
from mt_cli.documents.sentences import segmenter
from mt_cli.documents.subtitles import read_srt


class DocumentFormat(str, enum.Enum):
    """What a document is: plain text (its lines split into sentences), HTML or SubRip subtitles."""

    TEXT = "text"
    HTML = "html"
    SRT = "srt"


_READERS = {DocumentFormat.TEXT: read_text, DocumentFormat.HTML: read_html, DocumentFormat.SRT: read_srt}


def read_documents(texts: Sequence[str], form: DocumentFormat, language: str) -> list[Document]:
    """Each of ``texts`` as a ``Document`` of ``form``, its sentences split by the rules of
    ``language`` (the source language: an ISO 639-1 code such as de)."""
    segment = segmenter()
    read = _READERS[form]
    return [read(text, language, segment) for text in texts]
