"""The one interface every consumer of a trained model talks to, whatever the engine.

``mt translate``, ``mt score``, ``mt eval``, ``mt bench``, ``mt serve`` and the Python API
(``mt_cli.api``) hold an ``Engine`` and never ask which one it is. The implementations:
``Translator`` (mt's own PyTorch model, or through ``members.ensemble_of`` an ensemble of them)
and ``CTranslate2Engine`` (a model exported with ``mt export --format ctranslate2``). All split
lines into SentencePiece pieces, put the target tag of a multilingual model before each source
(``source_pieces``: the one place it is added, for translation, scoring and alignment alike),
append EOS to each source, cut sources to the model's positions, resolve the options once
(``CardEngine.resolve``), decode with the search ``search.run_search`` chooses for them (the
length penalty divides a finished hypothesis's summed log-probability by its length, EOS
included, to the power alpha, as CTranslate2, fairseq and Hugging Face do) and cap the output
at ``max_len_a * source length + max_len_b`` tokens. Results are the
types of ``results``; turning them into text (Moses n-best, Pharaoh, JSON) is the command line's
job.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from mt_cli.config.card import ModelCard, target_language
from mt_cli.config.options import DEFAULT_OPTIONS, TranslateOptions
from mt_cli.decode import protected
from mt_cli.decode.results import Alignment, Score, Translation
from mt_cli.errors import InputError
from mt_cli.text.tags import translation_prefix
from mt_cli.text.tokenizer import Tokenizer

Warn = Callable[[str], None]  # hears of each line cut to the model's positions


def ignore(message: str) -> None:
    """The default ``warn``: say nothing."""


class EngineKind(str, enum.Enum):
    """``--engine``: which implementation decodes."""

    MT = "mt"
    CTRANSLATE2 = "ctranslate2"


class Engine(Protocol):
    """A translation model, with the decoding it was tuned with: one language pair, or several
    directions (a multilingual model, told which language to write by a target tag).

    Every method takes lines in and gives one result per line, in order; ``warn`` hears of each
    source (or target) cut to the model's positions, its line numbered from ``first_line`` (for
    input that arrives in chunks). Bad options or input raise ``InputError``.
    """

    card: ModelCard  # languages, corpus, and the decoding the model was tuned with

    @property
    def origin(self) -> str:
        """Where the weights came from (a checkpoint file, an export directory, ensemble members)."""
        ...

    @property
    def src_lang(self) -> str: ...

    @property
    def tgt_lang(self) -> str: ...

    @property
    def directions(self) -> tuple[tuple[str, str], ...]:
        """Every (source, target) language pair the model was trained on, the card's first."""
        ...

    @property
    def beam_size(self) -> int:
        """The default beam size (the model card's)."""
        ...

    @property
    def parallel_batches(self) -> int:
        """How many calls may usefully run at once, from as many threads."""
        ...

    @property
    def tokenizers(self) -> tuple[str, str]:
        """Fingerprints (SHA-256 of the SentencePiece model bytes) of the source and target tokenizers."""
        ...

    def count_pieces(self, lines: list[str]) -> list[int]:
        """How many source pieces each line is (the size of its work: ``mt serve`` batches by it)."""
        ...

    def resolve(self, options: TranslateOptions) -> TranslateOptions:
        """``options`` with the card's defaults filled in; an ``InputError`` if this engine
        cannot do what they ask (checked before any line is read), a beam too wide for its
        target vocabulary included. The one place options are resolved: options it resolved
        (``is_resolved``) pass through it, and through ``translate``, as they are."""
        ...

    def translate(
        self, lines: Sequence[str], options: TranslateOptions = ..., warn: Warn = ..., first_line: int = 1
    ) -> list[Translation]:
        """One ``Translation`` per line; an empty line gives one empty hypothesis."""
        ...

    def score(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        per_token: bool = False,
        warn: Warn = ...,
        first_line: int = 1,
        tgt_lang: str | None = None,
    ) -> list[Score]:
        """The log-probability of each target, in ``tgt_lang`` (None: the card's), given its
        source (forced decoding)."""
        ...

    def align(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        layer: int | None = None,
        warn: Warn = ...,
        first_line: int = 1,
        tgt_lang: str | None = None,
    ) -> list[Alignment]:
        """Word alignments between each source and its given target (in ``tgt_lang``); indices
        count the words of the lines as given, never a target tag."""
        ...

    def attention(
        self, source: str, target: Sequence[str], layer: int | None = None, tgt_lang: str | None = None
    ) -> tuple[list[str], list[str], Any]:
        """(source pieces, target pieces, (T, S) cross-attention) for one source and target pieces,
        EOS included on both sides (and the target tag first, if any): what ``mt translate
        --attention`` draws."""
        ...

    def translate_lines(
        self, lines: Sequence[str], options: TranslateOptions = ..., warn: Warn = ...
    ) -> list[str]:
        """One detokenized translation per line, without scores (what ``mt eval`` reads)."""
        ...

    def check_terms(self, options: TranslateOptions) -> None:
        """An ``InputError`` unless the model takes the glossary of resolved ``options``."""
        ...


class CardEngine:
    """What every engine shares: the card's languages, directions and default beam, the tokenizer
    fingerprints, the source pieces with their target tag, resolving options once, and the steps
    of ``translate``, ``score`` and ``align`` around each engine's own decoding (``_translated``,
    ``_forced``, ``_aligned``)."""

    card: ModelCard
    src_tok: Tokenizer
    tgt_tok: Tokenizer

    @property
    def src_lang(self) -> str:
        return self.card.data.src_lang

    @property
    def tgt_lang(self) -> str:
        return self.card.data.tgt_lang

    @property
    def directions(self) -> tuple[tuple[str, str], ...]:
        return self.card.data.directions()

    @property
    def beam_size(self) -> int:
        return self.card.decode.beam_size

    @property
    def parallel_batches(self) -> int:
        return 1  # one call at a time uses every core (torch's intra-op threads)

    @property
    def tokenizers(self) -> tuple[str, str]:
        return self.src_tok.fingerprint(), self.tgt_tok.fingerprint()

    def count_pieces(self, lines: list[str]) -> list[int]:
        return [len(ids) for ids in self.src_tok.encode(lines)]

    @property
    def max_positions(self) -> int:
        """The positions of the model that decodes: sources and targets are cut to fit them."""
        return self.card.model.max_positions

    def source_prefix(self, tgt_lang: str | None) -> str:
        """What goes before each source to write ``tgt_lang`` (None: the card's): the target tag
        of a model trained with them, else nothing; an ``InputError`` if the model does not write it."""
        return translation_prefix(self.card.data, target_language(self.card.data, tgt_lang))

    def source_pieces(
        self, lines: Sequence[str], max_positions: int, warn: Warn, first_line: int, tgt_lang: str | None
    ) -> list[list[int]]:
        """``source_pieces`` of the lines with the target tag of ``tgt_lang`` first (if any)."""
        return source_pieces(
            self.src_tok, lines, max_positions, warn, first_line, self.source_prefix(tgt_lang)
        )

    def prefix_pieces(self, tgt_lang: str | None) -> int:
        """How many pieces ``source_prefix`` puts before a source (a tag is one piece)."""
        return len(self.source_prefix(tgt_lang).split())

    def resolve(self, options: TranslateOptions) -> TranslateOptions:
        """``options`` with the card's defaults filled in, checked against the card, the size of
        the target vocabulary and the alignments this engine can give; resolved options as they are."""
        if options.is_resolved:
            return options
        if options.align:
            self._check_layer(options.alignment_layer)
        return self.card.resolve(options, self.tgt_tok.vocab_size)

    def translate(
        self,
        lines: Sequence[str],
        options: TranslateOptions = DEFAULT_OPTIONS,
        warn: Warn = ignore,
        first_line: int = 1,
    ) -> list[Translation]:
        """The lines' translations, with the user's placeholders and glossary (``protected``)."""
        return protected.translate(self, lines, self.resolve(options), warn, first_line)

    def _constrained(
        self,
        lines: Sequence[str],
        options: TranslateOptions,
        warn: Warn,
        first_line: int,
        constraints: list[list[list[int]]],
    ) -> list[Translation]:
        """``_translated``, each line's hypotheses holding its ``constraints`` (target token ids):
        an engine that can (``guarantees_terms``) overrides it."""
        raise NotImplementedError

    guarantees_terms = False  # whether ``_constrained`` forces terms: constrained beam search is mt's

    def check_terms(self, options: TranslateOptions) -> None:
        protected.check_terms(self, options)

    def translate_lines(
        self, lines: Sequence[str], options: TranslateOptions = DEFAULT_OPTIONS, warn: Warn = ignore
    ) -> list[str]:
        return [t.text for t in self.translate(lines, options.without_scores(), warn)]

    def score(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        per_token: bool = False,
        warn: Warn = ignore,
        first_line: int = 1,
        tgt_lang: str | None = None,
    ) -> list[Score]:
        check_pairs(sources, targets)
        src_ids, tgt_ids = self._pair_pieces(sources, targets, warn, first_line, tgt_lang)
        return [
            Score.of(source, target, pieces, log_probs, per_token)
            for source, target, (pieces, log_probs) in zip(
                sources, targets, self._forced(src_ids, tgt_ids), strict=True
            )
        ]

    def align(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        layer: int | None = None,
        warn: Warn = ignore,
        first_line: int = 1,
        tgt_lang: str | None = None,
    ) -> list[Alignment]:
        check_pairs(sources, targets)
        self._check_layer(layer)
        src_ids, tgt_ids = self._pair_pieces(sources, targets, warn, first_line, tgt_lang)
        return self._aligned(src_ids, tgt_ids, layer, self.prefix_pieces(tgt_lang))

    def _pair_pieces(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        warn: Warn,
        first_line: int,
        tgt_lang: str | None,
    ) -> tuple[list[list[int]], list[list[int]]]:
        """The piece ids of each source (target tag first, no EOS) and of each target (no BOS/EOS),
        cut to the model's positions."""
        src_ids = self.source_pieces(sources, self.max_positions, warn, first_line, tgt_lang)
        return src_ids, target_pieces(self.tgt_tok, targets, self.max_positions, warn, first_line)

    def _check_layer(self, layer: int | None) -> None:
        """An ``InputError`` unless this engine aligns with decoder layer ``layer`` (None: the last)."""
        raise NotImplementedError

    def _translated(
        self, lines: Sequence[str], options: TranslateOptions, warn: Warn, first_line: int
    ) -> list[Translation]:
        """``translate`` with resolved ``options``: each engine's own."""
        raise NotImplementedError

    def _forced(
        self, sources: list[list[int]], targets: list[list[int]]
    ) -> list[tuple[Sequence[str], Sequence[float]]]:
        """Forced decoding of each (source, target) of ``_pair_pieces``: the target's pieces and
        each one's log-probability, EOS last in both. Each engine's own."""
        raise NotImplementedError

    def _aligned(
        self, sources: list[list[int]], targets: list[list[int]], layer: int | None, tags: int
    ) -> list[Alignment]:
        """Word alignments of each (source, target) of ``_pair_pieces`` (``tags``: the target tag
        pieces before each source, which align to nothing). Each engine's own."""
        raise NotImplementedError


def check_pairs(sources: Sequence[str], targets: Sequence[str]) -> None:
    if len(sources) != len(targets):
        raise InputError(f"{len(sources)} sources but {len(targets)} targets; they must pair up")


def source_pieces(
    tokenizer: Tokenizer,
    lines: Sequence[str],
    max_positions: int,
    warn: Callable[[str], None],
    first_line: int = 1,
    prefix: str = "",
) -> list[list[int]]:
    """Each line's piece ids (no EOS yet), ``prefix`` (tags, ``text.tags``, each one piece) before
    every line that is not empty, cut so that with EOS they fit the model's positions, with one
    warning per cut line (numbered from ``first_line``). An empty line stays empty: no tag."""
    if prefix:
        lines = [prefix + line.strip() if line.strip() else "" for line in lines]
    return _pieces_within(tokenizer, lines, max_positions - 1, "source", warn, first_line)


def _pieces_within(
    tokenizer: Tokenizer, lines: Sequence[str], limit: int, side: str, warn: Warn, first_line: int
) -> list[list[int]]:
    """Each line's piece ids, cut to ``limit`` with one warning per cut line."""
    encoded = tokenizer.encode([line.strip() for line in lines])
    for number, ids in enumerate(encoded, start=first_line):
        if len(ids) > limit:
            message = f"{len(ids)} {side} pieces exceed the model's limit of {limit}; the rest is dropped"
            warn(f"line {number}: {message}")
            del ids[limit:]
    return encoded


def target_pieces(
    tokenizer: Tokenizer, lines: Sequence[str], max_positions: int, warn: Warn, first_line: int = 1
) -> list[list[int]]:
    """Each target line's piece ids (no BOS/EOS), cut so that BOS, the pieces and EOS fit the
    model's positions (as training's validation cuts them), with one warning per cut line."""
    return _pieces_within(tokenizer, lines, max_positions - 2, "target", warn, first_line)
