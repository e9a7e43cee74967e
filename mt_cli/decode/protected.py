"""What the user protects in a translation, around any engine's decoding (``CardEngine.translate``):
placeholders (``text.placeholders``) and a glossary's terms.

Placeholders are hidden behind symbols where the model was trained with them (or the options
ask for it) and put back after, each once; a line whose symbols had to be mended is named in a
warning. A glossary's terms are told to the model in the source (``text.terms``: append mode, a
model trained with ``data.terms``), or forced into the output by constrained beam search
(``decode.constrained``: guarantee mode, mt's engine, any of its models; told in the source as
well where the model was trained to read them). Both reach the engine as plain lines and
options without a glossary, so every engine and worker process decodes them as any other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from mt_cli.config.options import GlossaryMode, Terms, TranslateOptions
from mt_cli.decode.results import Translation
from mt_cli.errors import InputError
from mt_cli.specials import UNK_ID
from mt_cli.text import placeholders, terms
from mt_cli.text.tokenizer import Tokenizer

Warn = Callable[[str], None]  # engine.Warn, which imports this module


class Decoding(Protocol):
    """What this module uses of an engine (``engine.CardEngine``): its tokenizers and its own
    decoding of plain lines, with or without constraints."""

    src_tok: Tokenizer
    tgt_tok: Tokenizer
    guarantees_terms: bool

    def _translated(
        self, lines: Sequence[str], options: TranslateOptions, warn: Warn, first_line: int
    ) -> list[Translation]: ...

    def _constrained(
        self,
        lines: Sequence[str],
        options: TranslateOptions,
        warn: Warn,
        first_line: int,
        constraints: list[list[list[int]]],
    ) -> list[Translation]: ...


NEEDS_MT = "--glossary-mode guarantee needs mt's engine (--engine mt): constrained beam search is mt's"


def translate(
    engine: Decoding, lines: Sequence[str], options: TranslateOptions, warn: Warn, first_line: int
) -> list[Translation]:
    """The lines' translations by ``engine`` (its ``_translated`` and ``_constrained``) with
    resolved ``options``, their placeholders and glossary terms as the module says."""
    masking = knows_placeholders(engine) if options.placeholders is None else options.placeholders
    if not masking and options.glossary is None:
        return engine._translated(lines, options, warn, first_line)
    hidden = [placeholders.mask(line) for line in lines] if masking else None
    texts = [masked.text for masked in hidden] if hidden is not None else list(lines)
    if options.glossary is None:
        found = engine._translated(texts, options, warn, first_line)
    elif options.glossary_mode is GlossaryMode.GUARANTEE:
        found = _guaranteed(engine, texts, options, options.glossary, warn, first_line)
    else:
        check_terms(engine, options)
        texts = [terms.with_glossary(text, options.glossary) for text in texts]
        found = engine._translated(texts, options.with_glossary(None), warn, first_line)
    if hidden is None:
        return [replace(translation, source=line) for translation, line in zip(found, lines)]
    return [
        _unmasked(translation, line, masked, warn, number)
        for number, (translation, line, masked) in enumerate(zip(found, lines, hidden), start=first_line)
    ]


def check_terms(engine: Decoding, options: TranslateOptions) -> None:
    """An ``InputError`` unless the glossary of resolved ``options`` is in the languages they
    translate, the engine can guarantee its terms where asked, and, where they are only told in
    the source (append mode), the model was trained to take them (``data.terms``); nothing
    without a glossary."""
    glossary = options.glossary
    if glossary is None:
        return
    if options.glossary_mode is GlossaryMode.GUARANTEE and not engine.guarantees_terms:
        raise InputError(NEEDS_MT)
    if options.glossary_mode is GlossaryMode.APPEND and terms.TERM not in engine.src_tok.tags:
        raise InputError(
            "a glossary needs a model trained with data.terms (its source tokenizer has no "
            f"{terms.TERM} symbol): train one with a dictionary, e.g. configs/multi30k-terms.yaml, "
            "or force the terms with --glossary-mode guarantee"
        )
    if glossary.tgt_lang != options.tgt_lang:
        raise InputError(
            f"the glossary gives {glossary.tgt_lang} terms, but this translates into {options.tgt_lang}"
        )
    if options.align:
        raise InputError("alignments with a glossary would count the words the glossary adds; ask for one")


def knows_placeholders(engine: Decoding) -> bool:
    """Whether the model was trained with placeholders (``data.placeholders``): both its
    tokenizers hold their symbols."""
    first = placeholders.symbol(1)
    return first in engine.src_tok.tags and engine.tgt_tok.piece_id(first) != UNK_ID


def _guaranteed(
    engine: Decoding,
    texts: list[str],
    options: TranslateOptions,
    glossary: Terms,
    warn: Warn,
    first_line: int,
) -> list[Translation]:
    """The texts translated so that each holds the target of every term of ``glossary`` (the
    options') in it."""
    check_terms(engine, options)
    matches = [glossary.find(text) for text in texts]
    constraints = [engine.tgt_tok.encode([match.target for match in found]) for found in matches]
    if terms.TERM in engine.src_tok.tags:
        texts = [terms.annotated(text, [(m, m.target) for m in found]) for text, found in zip(texts, matches)]
    return engine._constrained(texts, options.with_glossary(None), warn, first_line, constraints)


def _mended(number: int, repairs: int, pieces: int) -> str:
    if pieces == 0:
        return (
            f"line {number}: the translation held {repairs} placeholder symbols the line had none of; dropped"
        )
    return (
        f"line {number}: {repairs} placeholder symbols of the translation lost, doubled or unknown; "
        f"each of the line's {pieces} placeholders is put back once"
    )


def _unmasked(
    translation: Translation, line: str, masked: placeholders.Masked, warn: Warn, number: int
) -> Translation:
    """``translation`` of ``masked`` with its placeholders back, as the translation of ``line``;
    a warning naming the line where some had to be mended."""
    hypotheses = []
    for hypothesis in translation.hypotheses:
        restored = placeholders.restore(hypothesis.text, masked)
        if restored.repairs and hypothesis is translation.hypotheses[0]:
            warn(_mended(number, restored.repairs, len(masked.pieces)))
        hypotheses.append(replace(hypothesis, text=restored.text))
    return replace(translation, source=line, hypotheses=tuple(hypotheses))
