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
import math
from collections.abc import Callable, Sequence
from typing import Protocol

from mt_cli.config import ModelCard
from mt_cli.text.tokenizer import Tokenizer


class EngineKind(str, enum.Enum):
    """``--engine``: which implementation decodes."""

    MT = "mt"
    CTRANSLATE2 = "ctranslate2"


class Engine(Protocol):
    """A translation model for one language pair, with the decoding it was tuned with."""

    card: ModelCard  # languages, corpus, and the decoding the model was tuned with

    @property
    def origin(self) -> str:
        """Where the weights came from (a checkpoint file, an export directory)."""
        ...

    @property
    def src_lang(self) -> str: ...

    @property
    def tgt_lang(self) -> str: ...

    @property
    def beam_size(self) -> int:
        """The default beam size (the model card's)."""
        ...

    @property
    def parallel_batches(self) -> int:
        """How many ``translate_lines`` calls may usefully run at once, from as many threads."""
        ...

    def translate_lines(
        self,
        lines: Sequence[str],
        beam_size: int | None = None,
        length_penalty: float | None = None,
        warn: Callable[[str], None] = ...,
    ) -> list[str]:
        """One detokenized translation per line, in order; an empty line gives an empty line.
        ``None`` takes the model card's value; ``warn`` hears of each source cut to the model's
        positions."""
        ...


class CardEngine:
    """What every engine reads from its model's card: languages and the default beam."""

    card: ModelCard

    @property
    def src_lang(self) -> str:
        return self.card.data.src_lang

    @property
    def tgt_lang(self) -> str:
        return self.card.data.tgt_lang

    @property
    def beam_size(self) -> int:
        return self.card.decode.beam_size

    @property
    def parallel_batches(self) -> int:
        return 1  # one call at a time uses every core (torch's intra-op threads)


def source_pieces(
    tokenizer: Tokenizer,
    lines: Sequence[str],
    max_positions: int,
    warn: Callable[[str], None],
    first_line: int = 1,
) -> list[list[int]]:
    """Each line's piece ids (no EOS yet), cut so that with EOS they fit the model's positions,
    with one warning per cut line (numbered from ``first_line``)."""
    limit = max_positions - 1
    encoded = tokenizer.encode([line.strip() for line in lines])
    for number, ids in enumerate(encoded, start=first_line):
        if len(ids) > limit:
            message = f"{len(ids)} source pieces exceed the model's limit of {limit}; the rest is dropped"
            warn(f"line {number}: {message}")
            del ids[limit:]
    return encoded


def output_limit(source_length: int, max_len_a: float, max_len_b: int, max_positions: int) -> int:
    """Most tokens generated for a source of ``source_length`` pieces (EOS included on both):
    ``max_len_a * source_length + max_len_b``, within the positions after BOS."""
    return min(max(1, math.floor(max_len_a * source_length) + max_len_b), max_positions - 1)
