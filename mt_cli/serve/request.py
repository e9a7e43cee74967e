"""What a /translate request asks for, once ``parse`` has read and checked it: its sentences
(each text read as a document of its format by the ``documents`` wing), the ``TranslateOptions``
they decode with, and LibreTranslate's answer from their hypotheses, each text put back
together around its translated sentences."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from mt_cli.config.options import TranslateOptions
from mt_cli.documents.document import Document
from mt_cli.documents.formats import DocumentFormat, read_documents
from mt_cli.serve.alternatives import Decoded, decode_options, join


@dataclass(frozen=True)
class TranslateRequest:
    texts: list[str]  # q, always as a list
    batch: bool  # q was a list, so translatedText is one
    auto: bool  # source was "auto", so the answer says which language was detected
    languages: tuple[str, ...]  # each text's source language, whose rules split its sentences
    alternatives: int = 0  # more translations asked for each text
    target: str | None = None  # the language to write (None: the engine's default)
    form: DocumentFormat = DocumentFormat.TEXT  # what each text is

    def options(self, server: TranslateOptions, default_beam: int) -> TranslateOptions:
        """What this request decodes with: the ``server``'s options (``mt serve``'s), writing its
        target, with its alternatives (``decode_options``; ``default_beam``: the model's)."""
        return decode_options(self.alternatives, replace(server, tgt_lang=self.target), default_beam)

    def read(self, languages: Sequence[str]) -> list[Document]:
        """Each text as a document, its sentences split by the rules of its language in
        ``languages``: its sentences, and the rest kept as written."""
        return [
            document
            for text, language in zip(self.texts, languages, strict=True)
            for document in read_documents([text], self.form, language)
        ]

    def answer(
        self,
        documents: Sequence[Document],
        hypotheses: Sequence[Sequence[Decoded]],
        detected: Sequence[dict[str, Any]] = (),
    ) -> dict[str, Any]:
        """LibreTranslate's answer from each document's sentences' hypotheses (best first), and
        for ``source: "auto"`` the language ``detected`` in each text (``{"confidence", "language"}``)."""
        translated, alternatives = [], []
        for document, sentences in zip(documents, hypotheses, strict=True):
            translated.append(document.rebuild([decoded.texts[0] for decoded in sentences]))
            alternatives.append(join(document, sentences, self.alternatives))
        body: dict[str, Any] = {"translatedText": translated if self.batch else translated[0]}
        if self.auto:
            body["detectedLanguage"] = list(detected) if self.batch else detected[0]
        if self.alternatives > 0:  # LibreTranslate has the key only when alternatives were asked for
            body["alternatives"] = alternatives if self.batch else alternatives[0]
        return body
