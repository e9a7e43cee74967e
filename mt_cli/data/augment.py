"""What ``prepare`` does to a corpus's training pairs as it reads them, before they are encoded:
mixSeq's joined pairs (``data.concat``), placeholder symbols (``data.placeholders``) and dictionary
terms annotated in the sources (``data.terms``). Each draws from its own seeded stream, per
corpus, so that a prepared corpus is the same every time its recipe is.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Iterable, Iterator

from mt_cli.config.sections import Config, CorpusConfig
from mt_cli.data.formats import Pair
from mt_cli.errors import DataError
from mt_cli.text import placeholders, terms
from mt_cli.text.glossary import Glossary

PLACEHOLDER_SEED = 1  # which training pairs get placeholders, and where: the same in every run
TERMS_SEED = 2  # which dictionary matches are annotated: the same in every run
CONCAT_SEED = 3  # which pairs data.concat joins: the same in every run
# data.concat joins a pair with one at most this many pairs on: a stream of any size is joined in
# one pass, holding at most this many pairs (times the probability).
CONCAT_REACH = 1000


def with_concatenations(
    pairs: Iterable[Pair], probability: float, index: int, made: Counter[str] | None = None
) -> Iterator[Pair]:
    """``pairs``, and with ``probability`` each joined with a later one, 1 to ``CONCAT_REACH``
    pairs on, drawn at random (``data.concat``: mixSeq), the same ones every time for corpus
    ``index``; ``made["joined"]`` counts them. One pass in bounded memory: every pair starts a
    joined pair with the probability, and is the second of one as often, but for the first and
    last ``CONCAT_REACH``."""
    if probability == 0:
        yield from pairs
        return
    rng = random.Random(CONCAT_SEED + index)
    waiting: dict[int, list[tuple[str, str]]] = {}  # position -> the pairs to be joined with it
    for position, (src, tgt) in enumerate(pairs):
        yield src, tgt
        firsts = waiting.pop(position, [])
        if src is None or tgt is None or not src.strip() or not tgt.strip():
            if firsts:  # a pair that cannot be joined passes its turn to the next
                waiting.setdefault(position + 1, []).extend(firsts)
            continue
        for first_src, first_tgt in firsts:
            yield f"{first_src} {src}", f"{first_tgt} {tgt}"
        if made is not None:
            made["joined"] += len(firsts)
        if rng.random() < probability:
            waiting.setdefault(position + rng.randint(1, CONCAT_REACH), []).append((src, tgt))


def with_placeholders(pairs: Iterable[Pair], share: float, index: int) -> Iterator[Pair]:
    """``pairs`` with the placeholder pieces both sides hold masked (``placeholders.mask_pair``) and
    symbols put into ``share`` of the others (``placeholders.sprinkle``), the same ones every time
    for corpus ``index``."""
    if share == 0:
        yield from pairs
        return
    rng = random.Random(PLACEHOLDER_SEED + index)
    for src, tgt in pairs:
        if src is None or tgt is None:
            yield src, tgt
        elif (masked := placeholders.mask_pair(src, tgt)) is not None:
            yield masked
        elif rng.random() < share:
            yield placeholders.sprinkle(src, tgt, rng)
        else:
            yield src, tgt


@functools.lru_cache(maxsize=4)  # read once for the tokenizers' check, the recipe and the annotations
def terms_dictionary(path: str, src_lang: str, tgt_lang: str) -> Glossary:
    """The term dictionary of ``data.terms`` (several targets a term allowed); ``DataError`` naming
    ``data.terms`` for a missing file or a line mt cannot read."""
    try:
        return Glossary.read(path, src_lang, tgt_lang, several_targets=True)
    except DataError as err:
        raise DataError(f"data.terms: {err}") from None


def with_terms(
    pairs: Iterable[Pair], cfg: Config, entry: CorpusConfig, index: int, made: Counter[str]
) -> Iterator[Pair]:
    """``pairs`` with their sources' dictionary terms annotated (``terms.for_training``) in a run
    with ``data.terms``, the same ones every time for corpus ``index``; ``made`` counts the
    annotated sources and terms."""
    if cfg.data.terms is None:
        yield from pairs
        return
    dictionary = terms_dictionary(cfg.data.terms, entry.src_lang, entry.tgt_lang)
    rng = random.Random(TERMS_SEED + index)
    for src, tgt in pairs:
        if src is not None and tgt is not None:
            src = terms.for_training(src, tgt, dictionary, cfg.data.terms_share, rng, cfg.data.terms_hidden)
            annotations = src.count(terms.TO)
            made["terms"] += annotations
            made["annotated"] += annotations > 0
        yield src, tgt
