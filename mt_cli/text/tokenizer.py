"""The two SentencePiece models (one per side), trained, reused when their settings match, and loaded.

The model itself (``Tokenizer``) is in ``text.pieces``; a source tokenizer's tags are
user-defined symbols (``text.tags``). Kept free of torch, batches and ``datasets`` so that ``mt
translate`` imports it cheaply.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sentencepiece as spm

from mt_cli.disk.files import atomic_write_bytes, write_json, writing
from mt_cli.disk.layout import RunDir
from mt_cli.errors import CheckpointError, ConfigError, DataError
from mt_cli.specials import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from mt_cli.text import placeholders, terms
from mt_cli.text.pieces import Tokenizer
from mt_cli.text.tags import source_tags
from mt_cli.text.vocabulary import VocabularyTokenizer

if TYPE_CHECKING:
    from mt_cli.config.card import ModelCard
    from mt_cli.config.sections import Config, TokenizerConfig


# The trainer records num_threads inside the model proto, so a machine-dependent value would
# make the saved bytes differ between machines; a fixed, modest count keeps them reproducible
# and leaves cores to other processes.
_TRAIN_THREADS = 2


def tokenizer_path(run_dir: str | Path, lang: str) -> Path:
    return RunDir(Path(run_dir)).tokenizer(lang)


def _settings_path(run_dir: str | Path, lang: str) -> Path:
    return RunDir(Path(run_dir)).tokenizer_settings(lang)


def _recipe(
    lang: str, vocab_size: int, cfg: TokenizerConfig, corpus: dict | None, tags: Sequence[str] = ()
) -> dict[str, Any]:
    """What a tokenizer is trained from besides its text: ``corpus`` identifies the training
    split it was sampled from (``corpus.train_fingerprint``), when the caller knows it; ``tags``
    are its user-defined symbols (recorded only when there are some, so an untagged tokenizer's
    record is what it always was)."""
    recipe: dict[str, Any] = {
        "lang": lang,
        "vocab_size": vocab_size,
        "model_type": cfg.model_type,
        "character_coverage": cfg.character_coverage,
    }
    if corpus is not None:
        recipe.update(corpus=corpus, sample_sentences=cfg.sample_sentences)
    if tags:
        recipe.update(tags=list(tags))
    return recipe


def _settings(
    texts: list[str],
    lang: str,
    vocab_size: int,
    cfg: TokenizerConfig,
    corpus: dict | None = None,
    tags: Sequence[str] = (),
) -> dict[str, Any]:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\n")
    return {
        **_recipe(lang, vocab_size, cfg, corpus, tags),
        "sentences": len(texts),
        "text_sha256": digest.hexdigest(),
    }


def train_tokenizer(
    texts: Iterable[str],
    lang: str,
    vocab_size: int,
    cfg: TokenizerConfig,
    run_dir: str | Path,
    corpus: dict | None = None,
    name: str | None = None,
    tags: Sequence[str] = (),
) -> Tokenizer:
    """Train ``run_dir/spm.{lang}.model`` on ``texts`` (the training split only) and load it;
    ``tags`` (``text.tags``) become user-defined symbols, each one piece whatever the text.

    Deterministic: the same texts and settings give the same model bytes. Also writes
    ``spm.{lang}.json`` with the settings and a hash of the texts, which
    ``prepare_tokenizers`` compares to decide whether the model can be reused.
    """
    texts = list(texts)
    if not any(t.strip() for t in texts):
        raise DataError(f"cannot train the {lang} tokenizer: the training text is empty")
    run_dir = Path(run_dir)
    with writing(run_dir):
        run_dir.mkdir(parents=True, exist_ok=True)
    model = io.BytesIO()
    # Passed only when there are tags: the option is recorded in the model, whose bytes must not change.
    symbols = {"user_defined_symbols": list(tags)} if tags else {}
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=cfg.model_type,
            character_coverage=cfg.character_coverage,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            num_threads=_TRAIN_THREADS,
            minloglevel=2,
            # Small corpora (train_limit smoke runs) cannot fill a large vocabulary; a smaller
            # vocabulary is better than refusing to train. vocab_size reports the real size.
            hard_vocab_limit=False,
            **symbols,
        )
    except RuntimeError as err:
        raise DataError(
            f"SentencePiece could not train the {lang} tokenizer: {str(err).splitlines()[0]}"
        ) from None
    path = tokenizer_path(run_dir, lang)
    atomic_write_bytes(path, lambda handle: handle.write(model.getvalue()))
    settings = _settings(texts, name or lang, vocab_size, cfg, corpus, tags)
    write_json(settings, _settings_path(run_dir, lang))
    return Tokenizer.load(path, lang)


def _saved_settings(run_dir: Path, lang: str) -> dict[str, Any] | str:
    """The settings a saved model was trained with, or why there are none to compare."""
    model, record = tokenizer_path(run_dir, lang), _settings_path(run_dir, lang)
    if not model.is_file():
        return f"{model.name} does not exist"
    if not record.is_file():
        return f"{record.name} (the settings it was trained with) is missing"
    try:
        saved = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return f"{record.name} is unreadable"
    return saved if isinstance(saved, dict) else f"{record.name} is unreadable"


def tokenizers_match(cfg: Config, run_dir: str | Path, corpus: dict) -> bool:
    """Both saved tokenizers were trained with this config on the corpus ``corpus`` identifies:
    reusable without reading the corpus again."""
    for (lang, name, vocab_size), tags in zip(_sides(cfg), _tags(cfg), strict=True):
        saved = _saved_settings(Path(run_dir), lang)
        wanted = _recipe(name, vocab_size, cfg.tokenizer, corpus, tags)
        if isinstance(saved, str) or any(saved.get(key) != value for key, value in wanted.items()):
            return False
    return True


def _sides(cfg: Config) -> tuple[tuple[str, str, int], tuple[str, str, int]]:
    """Per side: (language of its files, name its settings record, vocabulary size).

    A joint vocabulary is one model trained on both sides, saved under both languages' names. A
    side with several languages (``DataConfig.sides``) is named by all of them: "de+fr+cs".
    """
    (src, tgt), tok = cfg.data.sides(), cfg.tokenizer
    if tok.joint:
        return (src, f"{src}+{tgt}", tok.src_vocab_size), (tgt, f"{src}+{tgt}", tok.src_vocab_size)
    return (src, src, tok.src_vocab_size), (tgt, tgt, tok.tgt_vocab_size)


def _tags(cfg: Config) -> tuple[list[str], list[str]]:
    """Per side, its user-defined symbols: the source's tags (a joint model has them on both
    sides), then the placeholder symbols on both sides of a run trained with them, and the term
    markers on the source side of a run trained with terms."""
    tags = source_tags(cfg.data)
    held = placeholders.symbols() if cfg.data.placeholders > 0 else []
    markers = list(terms.MARKERS) if cfg.data.terms is not None else []
    return tags + held + markers, (tags + markers if cfg.tokenizer.joint else []) + held


def _why_retrain(run_dir: Path, lang: str, wanted: dict[str, Any]) -> str | None:
    """None if the saved model matches ``wanted``; otherwise the reason to retrain."""
    saved = _saved_settings(run_dir, lang)
    if isinstance(saved, str):
        return saved
    changed = [
        f"{key} {saved[key] if key in saved else 'unset'} -> {value}"
        for key, value in wanted.items()
        if key != "text_sha256" and (key not in saved or saved[key] != value)
    ]
    if "text_sha256" not in saved or saved["text_sha256"] != wanted["text_sha256"]:
        changed.append("training text changed")
    return "; ".join(changed) or None


def prepare_tokenizers(
    cfg: Config,
    run_dir: str | Path,
    train_src: list[str],
    train_tgt: list[str],
    log: Callable[[str], None] = print,
    frozen: bool = False,
    corpus: dict | None = None,
) -> tuple[Tokenizer, Tokenizer]:
    """(source, target) tokenizers: reuse the saved ones when they match the config, else train.

    ``frozen``: the run already holds checkpoints trained on these tokenizers, so a change is
    refused (CheckpointError) instead of silently making those checkpoints useless. ``corpus``
    identifies the split the texts were sampled from (saved, for ``tokenizers_match``).
    """
    if cfg.tokenizer.imported:
        raise ConfigError(
            "tokenizer.imported: the tokenizers came with an imported model and are never trained; "
            "start from that model with train.init_from"
        )
    run_dir = Path(run_dir)
    result: list[Tokenizer] = []
    texts_per_side = [train_src + train_tgt] * 2 if cfg.tokenizer.joint else [train_src, train_tgt]
    for (lang, name, vocab_size), texts, tags in zip(_sides(cfg), texts_per_side, _tags(cfg), strict=True):
        wanted = _settings(texts, name, vocab_size, cfg.tokenizer, corpus, tags)
        reason = _why_retrain(run_dir, lang, wanted)
        if reason is None:
            tok = Tokenizer.load(tokenizer_path(run_dir, lang), lang)
            log(f"tokenizer {lang}: reusing {tokenizer_path(run_dir, lang)} ({tok.vocab_size} pieces)")
        elif frozen:
            raise CheckpointError(
                f"{run_dir} holds a trained model whose {lang} tokenizer would change ({reason}); its "
                f"checkpoints depend on it: use another --run, or the settings in {run_dir / 'config.yaml'}"
            )
        elif cfg.tokenizer.joint and result:
            tok = _copy_joint(run_dir, result[0], lang)
            log(f"tokenizer {lang}: the joint model, copied from {tokenizer_path(run_dir, result[0].lang)}")
        else:
            log(f"tokenizer {lang}: training ({reason})")
            tok = train_tokenizer(texts, lang, vocab_size, cfg.tokenizer, run_dir, corpus, name, tags)
            if tok.vocab_size < vocab_size:
                log(f"tokenizer {lang}: corpus only supports {tok.vocab_size} of {vocab_size} pieces")
        result.append(tok)
    src, tgt = result
    if cfg.model.share_embeddings and src.vocab_size != tgt.vocab_size:
        raise DataError(
            f"model.share_embeddings needs one vocabulary size, but the corpus gave the tokenizers "
            f"{src.vocab_size} and {tgt.vocab_size} pieces; set both tokenizer vocab sizes to at most "
            f"{min(src.vocab_size, tgt.vocab_size)}"
        )
    return src, tgt


def _copy_joint(run_dir: Path, first: Tokenizer, lang: str) -> Tokenizer:
    """The joint model just trained for ``first``'s language, saved again under ``lang``."""
    for path in (tokenizer_path, _settings_path):
        data = path(run_dir, first.lang).read_bytes()
        atomic_write_bytes(path(run_dir, lang), lambda handle, data=data: handle.write(data))
    return Tokenizer.load(tokenizer_path(run_dir, lang), lang)


def load_tokenizer(model: Path, lang: str, vocabulary: Path | None = None) -> Tokenizer:
    """The SentencePiece model ``model``, numbered by its own ids or, for an imported model's, by
    the vocabulary file ``vocabulary`` (``text.vocabulary``); CheckpointError if either is missing."""
    if vocabulary is None:
        return Tokenizer.load(model, lang)
    return VocabularyTokenizer.load_numbered(model, vocabulary, lang)


def card_tokenizers(card: ModelCard, root: Path) -> tuple[Tokenizer, Tokenizer]:
    """The (source, target) tokenizers the card names in the directory ``root`` (a run or an export)."""

    def side(model: str, vocabulary: str | None, lang: str) -> Tokenizer:
        return load_tokenizer(root / model, lang, root / vocabulary if vocabulary is not None else None)

    return (
        side(card.src_tokenizer, card.src_vocabulary, card.data.src_lang),
        side(card.tgt_tokenizer, card.tgt_vocabulary, card.data.tgt_lang),
    )


def load_tokenizers(
    run_dir: str | Path, src_lang: str, tgt_lang: str, imported: bool = False
) -> tuple[Tokenizer, Tokenizer]:
    """The saved (source, target) tokenizers of a run (``imported``: numbered by their vocabulary
    files, ``tokenizer.imported``); CheckpointError if one is missing."""
    run = RunDir(Path(run_dir))
    return tuple(  # type: ignore[return-value]
        load_tokenizer(run.tokenizer(lang), lang, run.tokenizer_vocabulary(lang) if imported else None)
        for lang in (src_lang, tgt_lang)
    )


def tokenizer_stats(tok: Tokenizer, texts: list[str]) -> dict[str, Any]:
    """Figures for ``mt prepare``'s report.

    ``coverage`` is the fraction of pieces that are not UNK, so 1.0 means every character
    of ``texts`` is representable.
    """
    encoded = tok.encode(texts)
    n_pieces = sum(len(ids) for ids in encoded)
    n_unk = sum(ids.count(UNK_ID) for ids in encoded)
    return {
        "lang": tok.lang,
        "vocab_size": tok.vocab_size,
        "sentences": len(texts),
        "pieces": n_pieces,
        "pieces_per_sentence": n_pieces / len(texts) if texts else 0.0,
        "max_pieces": max((len(ids) for ids in encoded), default=0),
        "unk": n_unk,
        "coverage": 1.0 - n_unk / n_pieces if n_pieces else 1.0,
    }
