"""From a config to what training reads: the evaluation splits, a sample for the tokenizers, and
the training pairs encoded once into a prepared corpus on disk, one per corpus of
``data.corpora`` (each reused by its own key), mixed by weight when there are several.

Whoever runs several processes decides which one trains the tokenizers and writes the prepared
corpus (``train.run``); this module loads, samples, encodes and filters, and reports on it.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mt_cli.config.sections import Config, CorpusConfig
from mt_cli.data import augment, synthetic
from mt_cli.data.corpus import load_corpus, train_fingerprint, train_pairs
from mt_cli.data.filters import Filtered, PairFilter
from mt_cli.data.formats import Pair
from mt_cli.data.mixing import MixedCorpus
from mt_cli.data.prepared import PreparedCorpus, prepared_key, write_prepared
from mt_cli.disk.files import file_sha256
from mt_cli.disk.layout import RunDir
from mt_cli.disk.reading import batched
from mt_cli.errors import DataError
from mt_cli.text.tags import check_tags, corpus_prefix, source_tags
from mt_cli.text.tokenizer import Tokenizer, tokenizer_path, tokenizer_stats

if TYPE_CHECKING:
    import datasets

ENCODE_CHUNK = 50_000  # pairs encoded per SentencePiece call (it spreads them over every core)
SAMPLE_SEED = 0  # the tokenizers' sample does not change with train.seed: runs share tokenizers


@dataclass(frozen=True)
class EvalSet:
    """One direction's validation and test text, as a user would give it: no target tag (the
    engine puts it before each source, and validation's loss does as the engine does)."""

    src_lang: str
    tgt_lang: str
    val_src: list[str]
    val_ref: list[str]
    test_src: list[str]
    test_ref: list[str]

    @property
    def name(self) -> str:
        """``"de-en"``: how metrics.jsonl and test.json name the direction."""
        return f"{self.src_lang}-{self.tgt_lang}"


@dataclass(frozen=True)
class TrainingData:
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    train: PreparedCorpus | MixedCorpus  # the training pairs, on disk (several corpora: by weight)
    evaluation: tuple[EvalSet, ...]  # per direction, the run's own first: it chooses best.pt

    @property
    def first(self) -> EvalSet:
        """The run's own direction (data.src_lang -> data.tgt_lang), the first corpus's."""
        return self.evaluation[0]


def load_eval_splits(cfg: Config, log: Callable[[str], None]) -> datasets.DatasetDict:
    """The val and test splits of the configured corpus (training pairs are streamed instead)."""
    import datasets

    datasets.disable_progress_bars()  # our own log says what is being prepared
    splits = ["val", cfg.data.test_split]
    corpus = load_corpus(cfg.data, splits)
    log(" | ".join(f"{name}: {len(corpus[name]):,} pairs" for name in splits))
    return corpus


def load_more_directions(
    cfg: Config, log: Callable[[str], None]
) -> dict[tuple[str, str], datasets.DatasetDict]:
    """The val and test splits of every direction of the run after its first (whose are
    ``load_eval_splits``'s), each from the first corpus of that direction that has them; a
    direction none of whose corpora has them (text made by back-translation) is logged and left out."""
    import datasets

    datasets.disable_progress_bars()
    found = {}
    splits = ["val", cfg.data.test_split]
    for direction in cfg.data.directions()[1:]:
        name, reasons = "-".join(direction), []
        for entry in cfg.data.entries():
            if (entry.src_lang, entry.tgt_lang) != direction:
                continue
            try:
                found[direction] = load_corpus(entry, splits)
            except DataError as err:
                reasons.append(str(err))
                continue
            log(f"{name}: " + " | ".join(f"{s}: {len(found[direction][s]):,} pairs" for s in splits))
            break
        else:
            log(f"{name}: not validated or tested: {'; '.join(reasons)}")
    return found


def tokenizer_sample(cfg: Config) -> tuple[list[str], list[str]]:
    """At most ``tokenizer.sample_sentences`` training pairs, drawn uniformly in one pass over the
    stream (reservoir sampling) and kept in corpus order; a smaller corpus is taken whole. Several
    corpora are one stream, one after another; text that holds a tag of the run is refused here,
    before a tokenizer learns from it, and so is a term dictionary (``data.terms``) mt cannot read."""
    if cfg.data.terms is not None:  # read first: a bad dictionary fails before a tokenizer trains
        augment.terms_dictionary(cfg.data.terms, cfg.data.src_lang, cfg.data.tgt_lang)
    size = cfg.tokenizer.sample_sentences
    rng = random.Random(SAMPLE_SEED)
    reservoir: list[tuple[int, tuple[str, str]]] = []
    tags = source_tags(cfg.data)
    streams = (
        _naming(_refuse_tags(train_pairs(entry), tags), corpus_name(cfg, k))
        for k, entry in enumerate(cfg.data.entries())
    )
    decodable = (pair for pair in itertools.chain.from_iterable(streams) if None not in pair)
    for index, pair in enumerate(decodable):
        if index < size:
            reservoir.append((index, pair))
        elif (slot := rng.randrange(index + 1)) < size:
            reservoir[slot] = (index, pair)
    reservoir.sort(key=lambda item: item[0])
    return [src for _, (src, _) in reservoir], [tgt for _, (_, tgt) in reservoir]


def prepared_recipe(cfg: Config, run_root: Path, index: int = 0) -> dict:
    """What a prepared corpus (of corpus ``index`` of ``data.entries()``) is made from: a change
    to any of it makes a new one. A corpus alone and untagged has the key it always had."""
    entry = cfg.data.entries()[index]
    recipe = {
        "train": train_fingerprint(entry),
        "max_len": cfg.data.max_len,
        "max_length_ratio": entry.max_length_ratio,
        "dedupe": cfg.data.dedupe,
        "tokenizers": {
            side: file_sha256(tokenizer_path(run_root, name))
            for side, name in zip(("src", "tgt"), cfg.data.sides(), strict=True)
        },
    }
    if len(cfg.data.entries()) > 1:
        recipe["direction"] = [entry.src_lang, entry.tgt_lang]
    if prefix := corpus_prefix(cfg.data, entry):
        recipe["prefix"] = prefix
    if entry.concat:  # a recipe without it keeps the key it always had
        recipe["concat"] = entry.concat
    if cfg.data.placeholders > 0:
        recipe["placeholders"] = cfg.data.placeholders
    if cfg.data.terms is not None:
        dictionary = augment.terms_dictionary(cfg.data.terms, entry.src_lang, entry.tgt_lang)
        recipe["terms"] = {"dictionary": dictionary.fingerprint, "share": cfg.data.terms_share}
        if cfg.data.terms_hidden > 0:  # a recipe without it keeps the key it always had
            recipe["terms"]["hidden"] = cfg.data.terms_hidden
    if entry.translated:  # where its pairs came from: teacher runs, checkpoints, decoding
        recipe["origin"] = synthetic.resolve(entry).provenance()
    seeded = entry.concat or cfg.data.placeholders > 0 or cfg.data.terms is not None
    if index > 0 and seeded:  # the augmentations draw per corpus: a corpus listed twice, two draws
        recipe["augment_seeds"] = index
    return recipe


def prepared_directory(cfg: Config, run_root: Path, recipe: dict) -> Path:
    root = Path(cfg.data.prepared_dir) if cfg.data.prepared_dir is not None else RunDir(run_root).prepared
    return root / prepared_key(recipe)


def prepare_corpus(
    cfg: Config,
    run_root: Path,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    log: Callable[[str], None],
    index: int = 0,
) -> PreparedCorpus:
    """The prepared corpus of corpus ``index`` of ``data.entries()`` with these tokenizers:
    reused, or written first."""
    from tqdm import tqdm

    entry, name = cfg.data.entries()[index], corpus_name(cfg, index)
    recipe = prepared_recipe(cfg, run_root, index)
    directory = prepared_directory(cfg, run_root, recipe)
    if directory.exists():
        corpus = PreparedCorpus.open(directory, (src_tok.vocab_size, tgt_tok.vocab_size))
        log(f"prepared corpus: reusing {directory} ({len(corpus):,} pairs)")
        return corpus
    what = "the training pairs" if name == "train" else name
    log(f"prepared corpus: encoding {what} into {directory}")
    dropped = Filtered()  # a translated corpus's min_score counts here first
    read = _refuse_tags(train_pairs(entry, dropped), source_tags(cfg.data))
    made = Counter[str]()
    joined = augment.with_concatenations(read, entry.concat or 0.0, index, made)
    sprinkled = augment.with_placeholders(joined, cfg.data.placeholders, index)
    pairs = batched(augment.with_terms(sprinkled, cfg, entry, index, made), ENCODE_CHUNK)
    chunks = (([src for src, _ in chunk], [tgt for _, tgt in chunk]) for chunk in pairs)
    prefix = corpus_prefix(cfg.data, entry)
    keep = pair_filter(cfg, entry)
    with tqdm(desc="encode", unit=" pairs", leave=False, disable=None) as bar:
        try:
            corpus = write_prepared(
                directory, chunks, src_tok, tgt_tok, keep, recipe, bar.update, prefix, dropped
            )
        except DataError as err:  # unreadable, holding a tag, all filtered out: say which corpus
            raise _named(err, name) from None
    log(describe_prepared(name, corpus))
    if made["joined"]:
        log(f"{name}: {made['joined']:,} of the pairs read are two pairs joined (data.concat)")
    if made["terms"]:
        log(
            f"{name}: {made['terms']:,} terms annotated in {made['annotated']:,} of the sources read "
            "(data.terms); longer sources put fewer pairs in a batch of train.max_tokens"
        )
    return corpus


def prepare_corpora(
    cfg: Config, run_root: Path, src_tok: Tokenizer, tgt_tok: Tokenizer, log: Callable[[str], None]
) -> list[PreparedCorpus]:
    """The prepared corpus of every entry of ``data.corpora`` (of the one corpus, without it)."""
    check_tags(src_tok, source_tags(cfg.data))
    return [prepare_corpus(cfg, run_root, src_tok, tgt_tok, log, k) for k in range(len(cfg.data.entries()))]


def training_corpus(cfg: Config, parts: list[PreparedCorpus]) -> PreparedCorpus | MixedCorpus:
    """What the epoch plans batch: one corpus of weight 1 as it is (the batches of a one-corpus
    run do not change), else the corpora mixed by weight."""
    weights = [entry.weight for entry in cfg.data.entries()]
    return parts[0] if weights == [1.0] else MixedCorpus(parts, weights)


def corpus_name(cfg: Config, index: int) -> str:
    """How logs and reports name a corpus: "train" when it is the only one."""
    entries = cfg.data.entries()
    if not cfg.data.corpora:
        return "train"
    e = entries[index]
    tag = f", tag {e.tag}" if e.tag is not None else ""
    return f"corpus {index + 1} ({e.source} {e.src_lang}->{e.tgt_lang}, weight {e.weight:g}{tag})"


def describe_prepared(name: str, corpus: PreparedCorpus) -> str:
    """e.g. "train: 29,000 pairs read, 28,990 kept; dropped: ..." (from its manifest)."""
    manifest = corpus.manifest
    dropped = Filtered(**manifest["dropped"]).describe()
    return f"{name}: {manifest['read']:,} pairs read, {len(corpus):,} kept; dropped: {dropped}"


def describe_corpora(cfg: Config, parts: list[PreparedCorpus]) -> list[str]:
    """``mt prepare``'s lines about the prepared corpora: where each is and, with several, what
    each kept and dropped (its manifest says the same)."""
    if not cfg.data.corpora:
        return [f"prepared corpus: {parts[0].directory} ({len(parts[0]):,} pairs)"]
    return [
        f"{describe_prepared(corpus_name(cfg, k), part)} | prepared corpus: {part.directory}"
        for k, part in enumerate(parts)
    ]


def _named(err: DataError, name: str) -> DataError:
    """``err``, naming the corpus when the run has several ("train" when it has one)."""
    return err if name == "train" else DataError(f"{name}: {err}")


def _naming(pairs: Iterator[Pair], name: str) -> Iterator[Pair]:
    """``pairs``; a DataError while reading them names the corpus (``_named``)."""
    try:
        yield from pairs
    except DataError as err:
        raise _named(err, name) from None


def _refuse_tags(pairs: Iterator[Pair], tags: list[str]) -> Iterator[Pair]:
    """The pairs, unless one already holds a tag of the run: the tokenizer would read it as the tag."""
    if not tags:
        yield from pairs
        return
    for number, pair in enumerate(pairs, start=1):
        for text in pair:
            found = next((tag for tag in tags if text is not None and tag in text), None)
            if found is not None:
                raise DataError(
                    f"training pair {number:,} already holds the tag {found}, which the run puts "
                    "before sources; remove it from the text, or choose another tag"
                )
        yield pair


def pair_filter(cfg: Config, entry: CorpusConfig) -> PairFilter:
    """The filters of one corpus: the data section's, with the entry's length ratio."""
    return PairFilter(cfg.data.max_len, entry.max_length_ratio, cfg.data.dedupe)


def training_data(
    cfg: Config,
    splits: datasets.DatasetDict,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    train: PreparedCorpus | MixedCorpus,
    more: Mapping[tuple[str, str], datasets.DatasetDict] | None = None,
) -> TrainingData:
    """What the trainer reads: the prepared training pairs and the raw val and test text of the
    run's direction (``splits``) and of the ``more`` directions (``load_more_directions``)."""
    directions = {(cfg.data.src_lang, cfg.data.tgt_lang): splits, **(more or {})}
    evaluation = []
    for (src_lang, tgt_lang), corpus in directions.items():
        val, test = corpus["val"].to_dict(), corpus[cfg.data.test_split].to_dict()
        evaluation.append(EvalSet(src_lang, tgt_lang, val["src"], val["tgt"], test["src"], test["tgt"]))
    return TrainingData(src_tok, tgt_tok, train, tuple(evaluation))


def describe_corpus(
    sections: dict[str, tuple[list[str], list[str]]], src_tok: Tokenizer, tgt_tok: Tokenizer
) -> list[str]:
    """``mt prepare``'s report: pairs per section, and per tokenizer its coverage on each."""
    lines = [" | ".join(f"{name}: {len(src):,} pairs" for name, (src, _) in sections.items())]
    for side, tok in enumerate((src_tok, tgt_tok)):
        for name, texts in sections.items():
            stats = tokenizer_stats(tok, list(texts[side]))
            lines.append(
                f"{tok.lang} {name}: vocab {stats['vocab_size']:,} | coverage {stats['coverage']:.4%} | "
                f"{stats['pieces_per_sentence']:.1f} pieces per sentence"
            )
    return lines
