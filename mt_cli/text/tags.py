"""Tags before a source sentence: which language to write (``<2en>``, Johnson et al. 2017) and
where a training pair came from (``data.corpora[i].tag``, e.g. ``<bt>`` for back-translation,
Caswell et al. 2019).

A tag is a word at the start of the source text, followed by a space: ``"<2en> <bt> Ein Hund."``.
The source tokenizer holds every tag of its run as a SentencePiece user-defined symbol, and
``Tokenizer.encode`` turns leading tags into their ids, so a tag is one piece, never split. The
target tag comes first, so that what the model sees at the start of a sentence is the same in
training and in translation (where only the target tag is given).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mt_cli.errors import DataError
from mt_cli.specials import UNK_ID, target_tag

if TYPE_CHECKING:
    from mt_cli.config.sections import CorpusConfig, DataConfig
    from mt_cli.text.pieces import Tokenizer


def tagged_targets(data: DataConfig) -> tuple[str, ...]:
    """The target languages that have a tag (``<2xx>``) before the source: all of them when the
    run uses target tags, none otherwise."""
    return data.languages()[1] if data.uses_target_tags() else ()


def source_tags(data: DataConfig) -> list[str]:
    """Every tag the run's source tokenizer keeps whole (its user-defined symbols), in a fixed
    order: the target tags (when the run uses them), then the corpora's own tags."""
    targets = [target_tag(lang) for lang in tagged_targets(data)]
    return list(dict.fromkeys(targets + [e.tag for e in data.entries() if e.tag is not None]))


def corpus_prefix(data: DataConfig, entry: CorpusConfig) -> str:
    """What goes before every training source of ``entry`` (one of ``data.entries()``)."""
    tags = [target_tag(entry.tgt_lang)] if data.uses_target_tags() else []
    return "".join(f"{tag} " for tag in tags + ([entry.tag] if entry.tag is not None else []))


def translation_prefix(data: DataConfig, tgt_lang: str | None = None) -> str:
    """What goes before a sentence to translate into ``tgt_lang`` (default: the run's
    ``data.tgt_lang``): its target tag when the model was trained with target tags, else nothing."""
    return f"{target_tag(tgt_lang or data.tgt_lang)} " if data.uses_target_tags() else ""


def check_tags(tok: Tokenizer, tags: Sequence[str]) -> None:
    """DataError unless every tag is one of ``tok``'s user-defined symbols (a tokenizer made for
    another run, or adopted from one, may lack a tag or hold it as an ordinary piece)."""
    for tag in tags:
        if tag in tok.tags:
            continue
        if any(tok.piece_id(piece) != UNK_ID for piece in (tag, f"\u2581{tag}")):  # ▁: a word start
            raise DataError(
                f"tag {tag} collides with a piece of the {tok.lang} vocabulary (an ordinary piece, not a "
                "tag); its training text held the tag: remove it from the text, or choose another tag"
            )
        raise DataError(
            f"the {tok.lang} tokenizer has no tag {tag}: it was trained without it; "
            "retrain it (`mt prepare` into a new --run) or drop the tag"
        )
