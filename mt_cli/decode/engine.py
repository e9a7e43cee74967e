"""The one interface every consumer of a trained model talks to: lines in, lines out.

``mt translate``, ``mt eval``, ``mt bench`` and ``mt serve`` hold an ``Engine`` and never ask
which one it is. Two implementations: ``Translator`` (mt's own PyTorch model) and
``CTranslate2Engine`` (a model exported with ``mt export --format ctranslate2``). Both split
the lines into SentencePiece pieces, append EOS to each source, cut sources to the model's
positions, decode with the same search (the length penalty divides a finished hypothesis's
summed log-probability by its length, EOS included, to the power alpha, as CTranslate2, fairseq
and Hugging Face do) and cap the output at ``max_len_a * source length + max_len_b`` tokens.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Protocol


class EngineKind(str, enum.Enum):
    """``--engine``: which implementation decodes."""

    MT = "mt"
    CTRANSLATE2 = "ctranslate2"


class Engine(Protocol):
    """A translation model for one language pair, with the decoding it was tuned with."""

    @property
    def src_lang(self) -> str: ...

    @property
    def tgt_lang(self) -> str: ...

    @property
    def beam_size(self) -> int:
        """The default beam size (the model card's)."""
        ...

    def translate_lines(
        self, lines: Sequence[str], beam_size: int | None = None, length_penalty: float | None = None
    ) -> list[str]:
        """One detokenized translation per line, in order; an empty line gives an empty line.
        ``None`` takes the model card's value."""
        ...
