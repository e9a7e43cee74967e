"""What a /translate request asks for, once ``parse`` has read and checked it: its lines, the
``TranslateOptions`` they decode with, and LibreTranslate's answer from their hypotheses."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from mt_cli.config.options import TranslateOptions
from mt_cli.serve.alternatives import Hypotheses, decode_options, join


@dataclass(frozen=True)
class TranslateRequest:
    texts: list[str]  # q, always as a list
    batch: bool  # q was a list, so translatedText is one
    auto: bool  # source was "auto", so the answer says which language was detected
    alternatives: int = 0  # more translations asked for each text
    target: str | None = None  # the language to write (None: the engine's default)

    def options(self, server: TranslateOptions, default_beam: int) -> TranslateOptions:
        """What this request decodes with: the ``server``'s options (``mt serve``'s), writing its
        target, with its alternatives (``decode_options``; ``default_beam``: the model's)."""
        return decode_options(self.alternatives, replace(server, tgt_lang=self.target), default_beam)

    def lines(self) -> list[str]:
        """Every line of every text, in order: what the engine decodes."""
        return [line for text in self.texts for line in split_lines(text)]

    def answer(
        self, outputs: Sequence[Hypotheses], detected: Sequence[dict[str, Any]] = ()
    ) -> dict[str, Any]:
        """LibreTranslate's answer from the hypotheses (best first) of ``lines()``, in order, and
        for ``source: "auto"`` the language ``detected`` in each text (``{"confidence", "language"}``)."""
        translated, alternatives, start = [], [], 0
        for text in self.texts:
            count = len(split_lines(text))
            lines = outputs[start : start + count]
            translated.append("\n".join(hyps[0] for hyps in lines))
            alternatives.append(join(lines, self.alternatives))
            start += count
        body: dict[str, Any] = {"translatedText": translated if self.batch else translated[0]}
        if self.auto:
            body["detectedLanguage"] = list(detected) if self.batch else detected[0]
        if self.alternatives > 0:  # LibreTranslate has the key only when alternatives were asked for
            body["alternatives"] = alternatives if self.batch else alternatives[0]
        return body


def split_lines(text: str) -> list[str]:
    """Lines split on "\\n" alone, a CR before it dropped; a final newline keeps an empty last line,
    so that joining the translations with "\\n" gives back the same line structure."""
    return [line.removesuffix("\r") for line in text.split("\n")]
