"""LibreTranslate's ``alternatives``: the n-best list after the best translation, as the server
decodes and answers it.

A request for N alternatives is decoded with ``n_best`` N + 1 and a beam of at least N + 1
(``max(beam, N + 1)``, the beam otherwise the server's: ``mt serve --beam``, or the model card's),
so its best translation may differ from that of a request without alternatives when N + 1 is
wider than the beam. LibreTranslate's Argos engine decodes with ``max(N + 1, 4)``; mt keeps the
server's beam where it is wide enough.

A text of several sentences has each sentence translated on its own (``request``); its k-th
alternative is the text put back together from each sentence's k-th hypothesis (a sentence with
fewer hypotheses gives its best), as Argos Translate joins its sentences' hypotheses. As
LibreTranslate does, an alternative equal to the best translation, to an earlier alternative or
empty is left out, so a text may get fewer than N.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from mt_cli.config.options import TranslateOptions
from mt_cli.decode.engine import Engine
from mt_cli.documents.document import Document

LINE_NUMBER = re.compile(r"line (\d+): ")  # how the engine's warnings name their line


@dataclass(frozen=True)
class Decoded:
    """What the engine gave for one line: its translations, best first (one without
    alternatives), and the engine's warnings about it (placeholders mended, a source cut to the
    model's positions, a glossary term past the length limit), without their line numbers."""

    texts: tuple[str, ...]
    warnings: tuple[str, ...] = ()


def decode_options(alternatives: int, server: TranslateOptions, default_beam: int) -> TranslateOptions:
    """What a request for ``alternatives`` decodes with: the ``server``'s options, and for N
    over 0 n-best N + 1 in a beam of at least N + 1, the server's beam (None: the model's
    ``default_beam``) where it is wider."""
    if alternatives == 0:
        return server
    wanted = alternatives + 1
    beam = max(default_beam if server.beam is None else server.beam, wanted)
    return replace(server, beam=beam, n_best=wanted)


def decoder(engine: Engine) -> Callable[[list[str], TranslateOptions], list[Decoded]]:
    """The batcher's engine call: lines and the options of their requests (a batch's key: one
    call decodes with one beam and n-best, into one language) -> each line's ``Decoded``.
    Without alternatives it is ``translate_lines``, as before they existed."""

    def decode(lines: list[str], key: TranslateOptions) -> list[Decoded]:
        heard: list[str] = []
        if key.n_best == 1:
            texts = [(text,) for text in engine.translate_lines(lines, key, warn=heard.append)]
        else:
            found = engine.translate(lines, key, warn=heard.append)
            texts = [tuple(hyp.text for hyp in translation.hypotheses) for translation in found]
        warnings = by_line(heard, len(lines))
        return [Decoded(hypotheses, said) for hypotheses, said in zip(texts, warnings, strict=True)]

    return decode


def by_line(heard: Sequence[str], lines: int) -> list[tuple[str, ...]]:
    """The engine's warnings (each ``line N: ...``, numbered from 1) as each line's, without the
    number; one that names no line of these is every line's, so that none is lost."""
    found: list[list[str]] = [[] for _ in range(lines)]
    for message in heard:
        named = LINE_NUMBER.match(message)
        if named is not None and 1 <= int(named.group(1)) <= lines:
            found[int(named.group(1)) - 1].append(message[named.end() :])
        else:
            for said in found:
                said.append(message)
    return [tuple(said) for said in found]


def join(document: Document, sentences: Sequence[Decoded], count: int) -> list[str]:
    """Up to ``count`` alternatives of ``document`` whose sentences have these hypotheses (see
    the module docstring): the k-th from each sentence's k-th, or its best where it has fewer."""
    best = document.rebuild([decoded.texts[0] for decoded in sentences])
    seen = {best, ""}  # LibreTranslate's filter_unique: nothing equal to the best, nothing empty
    found = []
    for k in range(1, count + 1):
        text = document.rebuild([d.texts[k] if k < len(d.texts) else d.texts[0] for d in sentences])
        if text not in seen:
            seen.add(text)
            found.append(text)
    return found
