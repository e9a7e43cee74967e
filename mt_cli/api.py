"""mt's Python API, the one the ``mt`` command line calls: ``load`` a trained model, then
``translate``, ``score`` and ``align`` lines with it (docs/api.md).

``load`` opens a run directory (``mt train``'s) or a CTranslate2 export directory, in mt's engine
or CTranslate2's, alone or as an ensemble of several runs; the ``Model`` it returns takes lists of
lines and returns the typed results of ``decode.results``, one per line, in order, and translates
whole documents (plain text split into sentences, HTML, subtitles) and files (.txt, .html, .srt,
.docx, .pptx, .odt, .odp, .epub) through ``documents``. Whatever goes wrong is an ``MtError``
with a one-line message (``InputError`` for what the caller can fix).
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, TypeVar

from mt_cli.config.options import DEFAULT_OPTIONS, TranslateOptions
from mt_cli.decode.engine import Engine, EngineKind
from mt_cli.decode.results import Alignment, Score, Translation
from mt_cli.disk.layout import ExportFiles, run_and_checkpoint
from mt_cli.documents.document import rebuild_all
from mt_cli.documents.filetypes import FileFormat, read_file
from mt_cli.documents.formats import DocumentFormat, read_documents
from mt_cli.errors import InputError
from mt_cli.runtime.precision import ComputeType

__all__ = ["Model", "load"]

E = TypeVar("E", bound=enum.Enum)
FILE_CHUNK = 256  # sentences of a file translated in one call, between two calls of ``progress``


def _warn(message: str) -> None:
    warnings.warn(message, stacklevel=3)


def _quiet(message: str) -> None:
    pass


def load(
    path: str | Path,
    checkpoint: str | None = None,
    engine: EngineKind | str = EngineKind.MT,
    device: str = "auto",
    compute_type: ComputeType | str | None = None,
    ensemble: Sequence[str | Path] = (),
    weights: Sequence[float] | None = None,
    warn: Callable[[str], None] | None = None,
    log: Callable[[str], None] | None = None,
    processes: int | None = None,
) -> Model:
    """Open a trained model.

    ``path``: a run directory, or a CTranslate2 export (``engine="ctranslate2"``; a run's export
    is made on first use). ``checkpoint``: a file or a name in the run (best, last, average; None:
    best). ``device``: auto, cpu or cuda. ``compute_type``: float32, bfloat16 or float16 for mt,
    CTranslate2's types for it (None: the engine's default). ``ensemble``: more runs, each
    ``"RUN"`` or ``"RUN:CHECKPOINT"``, combined with ``path`` per step by their weighted mean
    log-probabilities (``weights``: one per model, ``path`` first; default equal). ``warn``
    hears of lines cut to the model's positions (default: ``warnings.warn``), ``log`` of a run's
    CTranslate2 export being made (default: nothing). ``processes``: mt's worker processes that
    decode batches side by side (None: one per thread torch uses, on a Linux CPU; 1: none; they
    start at the first call of several batches and end with the model); CTranslate2 runs its own.
    """
    kind = _member(EngineKind, engine, "engine")
    precision = (
        ComputeType.DEFAULT if compute_type is None else _member(ComputeType, compute_type, "compute type")
    )
    root = Path(path)
    if kind is EngineKind.CTRANSLATE2:
        if ensemble or weights is not None:
            raise InputError("CTranslate2 has no ensembles; decode an ensemble with --engine mt")
        from mt_cli.decode.ctranslate2 import CTranslate2Engine
        from mt_cli.export.runs import ctranslate2_model_dir

        model_dir = ctranslate2_model_dir(root, checkpoint, log or _quiet)
        return Model(CTranslate2Engine(model_dir, device, precision), warn)
    from mt_cli.decode.members import ensemble_of
    from mt_cli.decode.translator import Translator
    from mt_cli.runtime.device import inference_dtype, resolve_device
    from mt_cli.trained import load_trained

    members = [(root, checkpoint), *(run_and_checkpoint(spec) for spec in ensemble)]
    for run, _ in members:
        if (run / ExportFiles.CARD).is_file():
            raise InputError(f"{run} is a CTranslate2 export; open it with --engine ctranslate2")
    if processes is not None and processes < 1:
        raise InputError(f"processes {processes} must be at least 1 (1 decodes in this process)")
    inference_dtype(resolve_device(device), precision)  # a device or precision refused before any loading
    translators = [Translator.of(load_trained(run, point), device, precision) for run, point in members]
    return Model(replace(ensemble_of(translators, weights), processes=processes), warn)


def _member(kind: type[E], value: object, what: str) -> E:
    """``value`` as a member of the enum ``kind``, or an InputError naming the valid ones."""
    try:
        return kind(value)
    except ValueError:
        names = ", ".join(member.value for member in kind)
        raise InputError(f"{what} {value!r} is not one of {names}") from None


class Model:
    """A loaded model: every method takes lines and returns one result per line, in order."""

    def __init__(self, engine: Engine, warn: Callable[[str], None] | None = None) -> None:
        self.engine = engine
        self.warn = warn or _warn

    @property
    def src_lang(self) -> str:
        return self.engine.src_lang

    @property
    def tgt_lang(self) -> str:
        return self.engine.tgt_lang

    @property
    def directions(self) -> tuple[tuple[str, str], ...]:
        """Every (source, target) language pair the model was trained on; ``tgt_lang`` chooses
        among their targets (the first direction's by default)."""
        return self.engine.directions

    @property
    def origin(self) -> str:
        """Where the weights came from (checkpoint files, an export directory)."""
        return self.engine.origin

    def options(self, options: TranslateOptions | None = None, **overrides: Any) -> TranslateOptions:
        """The options ``translate`` would use, checked now (``InputError`` if this model cannot):
        ``options`` (None: every default) with any of its fields given as keywords instead
        (``beam=4``, ``sampling=Sampling(top_k=10)``, ...). What it returns passes through every
        method here, and the engine, as it is: options are resolved once."""
        return self.engine.resolve(_options(options, overrides))

    def translate(
        self, lines: Sequence[str], options: TranslateOptions | None = None, **overrides: Any
    ) -> list[Translation]:
        """Translate ``lines`` with ``options`` (a ``TranslateOptions``, None: the model's
        defaults), or any of its fields as keywords: ``beam`` 1 is greedy search, ``n_best``
        hypotheses per line (at most the beam), ``sampling`` draws instead of searching,
        ``align`` adds word alignments from decoder layer ``alignment_layer``'s cross-attention.
        None: the model's default. ``scores=False`` spares greedy search the scores (NaN then;
        about 20% of its time). ``tgt_lang``: the language to write, one of the model's
        ``directions`` (None: its first); ``src_lang``, if given, is checked to be one the model
        reads (it changes nothing else)."""
        return next(self.translate_stream([_lines(lines, "lines")], options, **overrides))

    def translate_stream(
        self, chunks: Iterable[Sequence[str]], options: TranslateOptions | None = None, **overrides: Any
    ) -> Iterator[list[Translation]]:
        """``translate`` chunk after chunk (a large file, a pipe), yielding each chunk's
        translations as soon as they are done; warnings number lines across chunks. The options
        are checked before the first chunk is read."""
        return self._translate_chunks(chunks, self.options(options, **overrides))

    def _translate_chunks(
        self, chunks: Iterable[Sequence[str]], resolved: TranslateOptions
    ) -> Iterator[list[Translation]]:
        done = 0
        for chunk in chunks:
            yield self.engine.translate(_lines(chunk, "lines"), resolved, self.warn, done + 1)
            done += len(chunk)

    def translate_documents(
        self,
        documents: Sequence[str],
        form: DocumentFormat | str = DocumentFormat.TEXT,
        options: TranslateOptions | None = None,
        **overrides: Any,
    ) -> list[str]:
        """Translate whole documents, each into one text: ``form`` "text" splits every line into
        sentences and keeps the whitespace and line breaks around them; "html" translates the
        text of an HTML page or fragment and keeps its markup; "srt" translates the text of
        SubRip subtitles' cues and keeps their numbers and timings (docs/api.md says how). Sentences
        are split by the rules of ``src_lang`` (None: the model's first source language). The
        sentences of all ``documents`` are translated together, in one call, with ``options`` or
        its fields as keywords, as for ``translate``; one text comes back for each document, so
        ``n_best`` stays 1 and there are no alignments."""
        if isinstance(documents, str):
            raise InputError("documents must be a list of texts, not one string (use translate_document)")
        kind = _member(DocumentFormat, form, "format")
        resolved = self._document_options(options, overrides)
        read = read_documents(list(documents), kind, resolved.src_lang or self.src_lang)
        units = [unit for document in read for unit in document.units]
        found = self.engine.translate(units, resolved.without_scores(), self.warn, 1) if units else []
        return rebuild_all(read, [translation.text for translation in found])

    def translate_document(
        self,
        document: str,
        form: DocumentFormat | str = DocumentFormat.TEXT,
        options: TranslateOptions | None = None,
        **overrides: Any,
    ) -> str:
        """``translate_documents`` of one document."""
        return self.translate_documents([document], form, options, **overrides)[0]

    def translate_file(
        self,
        data: bytes,
        form: FileFormat | str,
        options: TranslateOptions | None = None,
        progress: Callable[[int, int], None] | None = None,
        name: str = "the file",
        **overrides: Any,
    ) -> bytes:
        """Translate a whole file: ``data``, its bytes, read as ``form`` ("text", "html", "srt":
        UTF-8, as ``translate_documents`` reads them; "docx", "pptx", "odt", "odp", "epub": a
        Word document, a PowerPoint presentation, an OpenDocument text or presentation, an EPUB
        book, their runs and formatting kept), and the translated file's bytes back. Options as for
        ``translate_documents``; ``progress(done, total)`` hears of the sentences translated
        after each ``FILE_CHUNK`` of them; ``name`` is the file as an error message calls it."""
        kind = _member(FileFormat, form, "format")
        resolved = self._document_options(options, overrides).without_scores()
        read = read_file(data, kind, resolved.src_lang or self.src_lang, name)
        units, found = list(read.units), []
        for start in range(0, len(units), FILE_CHUNK):
            chunk = self.engine.translate(units[start : start + FILE_CHUNK], resolved, self.warn, start + 1)
            found += [translation.text for translation in chunk]
            if progress is not None:
                progress(len(found), len(units))
        return read.rebuild(found)

    def _document_options(
        self, options: TranslateOptions | None, overrides: dict[str, Any]
    ) -> TranslateOptions:
        resolved = self.options(options, **overrides)
        if resolved.n_best != 1 or resolved.align:
            raise InputError("a document is translated into one text: n_best and align are for translate")
        return resolved

    def score(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        per_token: bool = False,
        tgt_lang: str | None = None,
    ) -> list[Score]:
        """The model's log-probability of each target (in ``tgt_lang``; None: the model's first
        target language) given its source (forced decoding)."""
        return next(self.score_stream([(sources, targets)], per_token, tgt_lang))

    def score_stream(
        self,
        chunks: Iterable[tuple[Sequence[str], Sequence[str]]],
        per_token: bool = False,
        tgt_lang: str | None = None,
    ) -> Iterator[list[Score]]:
        """``score`` chunk after chunk of (sources, targets), as ``translate_stream``; the target
        language is checked before the first chunk is read."""
        self.engine.resolve(TranslateOptions(tgt_lang=tgt_lang))
        return self._score_chunks(chunks, per_token, tgt_lang)

    def _score_chunks(
        self, chunks: Iterable[tuple[Sequence[str], Sequence[str]]], per_token: bool, tgt_lang: str | None
    ) -> Iterator[list[Score]]:
        done = 0
        for sources, targets in chunks:
            sources, targets = _lines(sources, "sources"), _lines(targets, "targets")
            yield self.engine.score(sources, targets, per_token, self.warn, done + 1, tgt_lang)
            done += len(sources)

    def align(
        self,
        sources: Sequence[str],
        targets: Sequence[str] | None = None,
        layer: int | None = None,
        tgt_lang: str | None = None,
    ) -> list[Alignment]:
        """Word alignments (source word, target word) of each source with its target, or with its
        own translation (the model's default decoding) when ``targets`` is None. ``layer``: the
        decoder layer whose cross-attention (mean over heads) aligns; None: the last. ``tgt_lang``
        as for ``translate``; the indices never count a target tag."""
        sources = _lines(sources, "sources")
        if targets is None:
            found = self.translate(sources, align=True, alignment_layer=layer, tgt_lang=tgt_lang)
            return [t.best.alignment or () for t in found]
        return self.engine.align(sources, _lines(targets, "targets"), layer, self.warn, 1, tgt_lang)


def _options(options: TranslateOptions | None, overrides: dict[str, Any]) -> TranslateOptions:
    """``options`` (None: the defaults) with the fields in ``overrides`` replaced, or as they are
    without any (resolved ones stay resolved); an InputError naming the valid ones for any other
    keyword."""
    if options is not None and not isinstance(options, TranslateOptions):
        raise InputError(f"options must be a TranslateOptions, not {type(options).__name__}")
    names = [field.name for field in fields(TranslateOptions)]
    unknown = next((name for name in overrides if name not in names), None)
    if unknown is not None:
        raise InputError(f"unknown translation option {unknown!r}; the options are {', '.join(names)}")
    chosen = DEFAULT_OPTIONS if options is None else options
    return replace(chosen, **overrides) if overrides else chosen


def _lines(lines: Sequence[str], name: str) -> list[str]:
    """A list of lines; a lone string would be translated character by character, so it is refused."""
    if isinstance(lines, str):
        raise InputError(f"{name} must be a list of lines, not one string: pass [{lines[:20]!r}]")
    return list(lines)
