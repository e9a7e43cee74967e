"""The recipe's sections: one frozen dataclass per YAML section, every key a field with its type
and default. ``recipe`` reads and writes them, ``schema`` checks types and choices, ``rules``
and ``data_rules`` the values and combinations that types cannot express."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from mt_cli.config.options import TranslateOptions

Source = Literal["multi30k", "files", "table", "hub"]
# A corpus entry may also be made by translating text with other runs (train/backtranslation.py):
# back-translation (the text is either side) or distillation (the text is the source side, the
# teacher searches with its beam); or be the corrections users sent to `mt serve --suggestions`
# (data/suggestions.py).
CorpusSource = Literal["multi30k", "files", "table", "hub", "backtranslation", "distillation", "suggestions"]
TRANSLATED_SOURCES = ("backtranslation", "distillation")


@dataclass(frozen=True)
class CorpusConfig:
    """One entry of ``data.corpora``: a source with its languages, how often its pairs are drawn
    per epoch, and an optional tag before its sources. Its keys mean what the single-source keys
    of ``DataConfig`` mean; languages, ``dir`` and ``train_limit`` left out take the data section's."""

    source: CorpusSource | None = None  # required: rules.check_data says so in one line
    dir: str | None = None
    files: dict[str, list[str]] = field(default_factory=dict)
    tables: dict[str, list[str]] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    hub: str | None = None
    hub_config: str | None = None
    hub_splits: dict[str, str] = field(default_factory=dict)
    src_lang: str | None = None
    tgt_lang: str | None = None
    train_limit: int | None = None
    max_length_ratio: float | None = None  # as data.max_length_ratio (None: its value)
    concat: float | None = None  # as data.concat (None: its value)
    weight: float = 1.0  # each pair drawn this many times per epoch (a fraction: that share of them)
    tag: str | None = None  # e.g. "<bt>": a SentencePiece user-defined symbol before every source
    # source=backtranslation or distillation: ``text`` (one sentence per line, on this corpus's
    # ``text_side``) translated by the model of ``run`` (RUN or RUN:CHECKPOINT), combined per step
    # with the ``ensemble`` runs, in ``engine``, into the other side; train_limit: its first N
    # lines. ``decode``: how (beam, length_penalty, n_best, sampling; None: the run's own beam
    # search). ``min_score``: pairs whose translation scored lower (mean log-probability per piece)
    # are left out. The pairs are kept in cache_dir (None: that run's synthetic/).
    run: str | None = None
    ensemble: list[str] = field(default_factory=list)
    engine: Literal["mt", "ctranslate2"] = "mt"
    text: list[str] = field(default_factory=list)
    side: Literal["target", "source"] = "target"  # source: forward translation (self-training)
    decode: TranslateOptions | None = None
    min_score: float | None = None
    cache_dir: str | None = None
    # source=suggestions: the SQLite file `mt serve --suggestions` writes; its rows in this
    # corpus's direction, oldest first (train_limit: the first N).
    database: str | None = None

    @property
    def translated(self) -> bool:
        """Whether the pairs are made by translating ``text`` (before the data is read)."""
        return self.source in TRANSLATED_SOURCES

    @property
    def text_side(self) -> Literal["target", "source"]:
        """Which side of the pairs the text is: a distillation corpus's is always its source."""
        return "source" if self.source == "distillation" else self.side


@dataclass(frozen=True)
class DataConfig:
    source: Source = "multi30k"
    dir: str | None = None  # local Multi30k copy; else $MT_DATA_DIR, else the hub
    files: dict[str, list[str]] = field(default_factory=dict)  # split -> [src_path, tgt_path]
    tables: dict[str, list[str]] = field(default_factory=dict)  # split -> TSV/JSONL/Parquet files
    columns: list[str] = field(default_factory=list)  # [source column, target column] of tables or hub
    hub: str | None = None  # a Hugging Face dataset name, for source=hub
    hub_config: str | None = None
    hub_splits: dict[str, str] = field(default_factory=dict)  # our split -> the dataset's split name
    src_lang: str = "de"
    tgt_lang: str = "en"
    max_len: int = 128  # tokens per side; longer training pairs are dropped (and counted)
    train_limit: int | None = None  # use only the first N training pairs (smoke runs)
    max_length_ratio: float | None = None  # drop training pairs with one side this many times longer
    # mixSeq (Wu et al. 2021): after each training pair, with this probability, it joined with a
    # pair drawn at random from the next 1,000 (source to source, target to target) as one more
    # pair, so that the model also learns from, and for, two sentences sent as one; 0: off.
    concat: float = 0.0
    dedupe: bool = False  # drop training pairs equal (both sides) to one kept earlier
    prepared_dir: str | None = None  # where prepared corpora go (None: RUN/prepared)
    workers: int = 0  # DataLoader worker processes building training batches (0: the training process)
    test_split: str = "test2016"
    # Several corpora mixed by weight; empty: the single-source keys above are the one corpus.
    corpora: list[CorpusConfig] = field(default_factory=list)
    target_tags: bool = False  # <2xx> before every source even with one target language
    # Share of training pairs given placeholder symbols (<ph1>, ...) at corresponding places, so
    # that the model learns to carry {{...}}, %s, URLs and the like (text.placeholders); over 0,
    # both tokenizers hold the symbols, and the pieces both sides of a pair hold are masked.
    placeholders: float = 0.0
    # A bilingual dictionary (source term, tab, target term a line; several lines may translate
    # one term) whose terms, where the reference has their translation, are annotated inline in
    # terms_share of the cases (text.terms), so that the model learns to take a glossary.
    terms: str | None = None
    terms_share: float = 0.5
    # Of those annotations, the share whose source words are left out ("<term> <to> ladder
    # </term>"; Ailem et al. 2021 mask them): the target term is then the model's only clue, so it
    # learns to write what it is told rather than its own choice.
    terms_hidden: float = 0.0

    def entries(self) -> tuple[CorpusConfig, ...]:
        """The corpora of the run, with the data section's languages, dir, train_limit,
        max_length_ratio and concat filled in where an entry leaves them out; the first is the run's own
        direction (it chooses best.pt)."""
        if not self.corpora:
            keys = ("source", "dir", "files", "tables", "columns", "hub", "hub_config", "hub_splits")
            one = CorpusConfig(**{key: getattr(self, key) for key in keys})
            langs = {"src_lang": self.src_lang, "tgt_lang": self.tgt_lang}
            limits = {
                "train_limit": self.train_limit,
                "max_length_ratio": self.max_length_ratio,
                "concat": self.concat,
            }
            return (dataclasses.replace(one, **langs, **limits),)
        return tuple(
            dataclasses.replace(
                entry,
                src_lang=entry.src_lang or self.src_lang,
                tgt_lang=entry.tgt_lang or self.tgt_lang,
                dir=entry.dir if entry.dir is not None else self.dir,
                train_limit=entry.train_limit if entry.train_limit is not None else self.train_limit,
                max_length_ratio=(
                    entry.max_length_ratio if entry.max_length_ratio is not None else self.max_length_ratio
                ),
                concat=entry.concat if entry.concat is not None else self.concat,
            )
            for entry in self.corpora
        )

    def languages(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The source languages and the target languages of the run, each in order of first use."""
        entries = self.entries()
        src = tuple(dict.fromkeys(entry.src_lang for entry in entries))
        return src, tuple(dict.fromkeys(entry.tgt_lang for entry in entries))

    def directions(self) -> tuple[tuple[str, str], ...]:
        """Every (source, target) language pair the run's corpora translate, in order of first use:
        the directions a model trained on them knows (one for a single corpus)."""
        return tuple(dict.fromkeys((entry.src_lang, entry.tgt_lang) for entry in self.entries()))

    def direction_entry(self, direction: tuple[str, str]) -> CorpusConfig:
        """The first corpus in ``direction`` (one of ``directions()``): its validation and test
        splits are that direction's."""
        return next(entry for entry in self.entries() if (entry.src_lang, entry.tgt_lang) == direction)

    def sides(self) -> tuple[str, str]:
        """Names of the source and target tokenizers: the side's language, or its languages joined
        with "+" when it has several (one model per side either way)."""
        src, tgt = self.languages()
        return "+".join(src), "+".join(tgt)

    def uses_target_tags(self) -> bool:
        """Whether ``<2xx>`` goes before every source: the model must be told which language to write."""
        return self.target_tags or len(self.languages()[1]) > 1


@dataclass(frozen=True)
class TokenizerConfig:
    src_vocab_size: int = 8000
    tgt_vocab_size: int = 6000
    model_type: Literal["bpe", "unigram"] = "bpe"
    character_coverage: float = 1.0
    sample_sentences: int = 1_000_000  # training pairs the tokenizers learn from (a uniform sample)
    joint: bool = False  # one model for both languages (src_vocab_size pieces), saved under both names
    src_bpe_dropout: float = 0.0  # training pairs only, resampled every epoch; 0: one fixed segmentation
    tgt_bpe_dropout: float = 0.0
    # The tokenizers came with an imported model (`mt import`): its SentencePiece models, numbered by
    # the model's vocabulary files; never trained, only adopted by a warm start (sizes: the vocabulary's).
    imported: bool = False


@dataclass(frozen=True)
class ModelConfig:
    d_model: int = 256
    n_heads: int = 4
    d_ff: int = 1024
    encoder_layers: int = 3
    decoder_layers: int = 3
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    # Training source pieces replaced by <unk> with this probability; with data.terms, never
    # a piece of a term annotation (<term> to </term>): an instruction to copy is kept whole.
    src_token_dropout: float = 0.0
    tgt_token_dropout: float = 0.0  # the same on the decoder's teacher-forced input pieces
    # SwitchOut-style (Wang et al. 2018): training pieces replaced by a random piece of the
    # vocabulary with this probability (beside, not instead of, the token dropout above).
    src_token_replace: float = 0.0
    tgt_token_replace: float = 0.0
    activation: Literal["relu", "gelu", "swish"] = "relu"
    norm_first: bool = False
    tie_output: bool = True
    share_embeddings: bool = False
    max_positions: int = 256
    # What published checkpoints need (Hugging Face Marian / OPUS-MT, see pretrained/);
    # the defaults are the model mt has always built, so older cards load unchanged.
    scale_embeddings: bool = True  # embeddings times sqrt(d_model) before the positions are added
    output_bias: bool = False  # a trainable bias on the logits (Marian's final_logits_bias)


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 1
    device: Literal["auto", "cpu", "cuda"] = "auto"
    amp: Literal["auto", "bf16", "fp16", "off"] = "auto"
    compile: bool = False
    pad_to_multiple: int = 1  # batch widths rounded up to a multiple of this (few shapes for a GPU)
    max_tokens: int = 4096  # source+target tokens per batch (before accumulation)
    accum_steps: int = 1
    optimizer_betas: tuple[float, float] = (0.9, 0.98)
    optimizer_eps: float = 1e-9
    weight_decay: float = 0.0
    lr: float = 7e-4
    schedule: Literal["inverse_sqrt", "noam", "constant", "cosine", "linear"] = "inverse_sqrt"
    warmup_steps: int = 1000
    lr_horizon: Literal["max_steps", "max_minutes"] = "max_steps"  # where cosine/linear reach zero
    label_smoothing: float = 0.1
    # R-Drop (Liang et al. 2021): each batch passes twice, with different dropout, and the loss
    # adds this weight times the two predictions' symmetric KL divergence; 0: off. An update then
    # costs about two, so it suits a short fine-tuning on few pairs, where they overfit.
    rdrop: float = 0.0
    # In a run with data.terms: the loss weight of the target pieces that write a term annotated
    # in the source (Ailem et al. 2021), so that the model learns to copy it; 1: no more than any
    # other piece. Needs tokenizer.joint (a term's pieces are found by their ids on both sides).
    # The training loss logged is the weighted one; validation's is not weighted.
    term_loss_weight: float = 1.0
    clip_norm: float = 1.0  # 0 disables clipping
    max_epochs: int = 100
    max_steps: int = 0  # 0: no limit
    max_minutes: float = 0.0  # wall-clock training budget; 0: no limit
    validate_every_steps: int = 0  # 0: once per epoch
    val_bleu: bool = True
    test_at_end: bool = True  # score the final best.pt on data.test_split (greedy and beam)
    patience: int = 0  # validations without a better val BLEU before stopping; 0: never
    keep_last: int = 5  # recent validation checkpoints kept for averaging
    average_last: int = 0  # average the last N kept checkpoints at the end; 0: use best.pt
    save_every_steps: int = 500
    log_every_steps: int = 100
    max_bad_steps: int = 10  # consecutive non-finite losses before the run stops
    tensorboard: bool = False  # also write the metrics to RUN/tensorboard/ (the tensorboard extra)
    dist_timeout_minutes: float = 30.0  # DDP: how long a rank waits in a collective for the others
    # Warm start (train/warm_start.py): RUN or RUN:CHECKPOINT (default best) gives the new run its
    # weights and tokenizers; what else to carry over (nothing: a fresh optimizer and schedule); what
    # not to train.
    init_from: str | None = None
    init_keep: list[Literal["optimizer", "schedule"]] = field(default_factory=list)
    freeze: list[Literal["encoder", "embeddings", "decoder", "output"]] = field(default_factory=list)


@dataclass(frozen=True)
class DecodeConfig:
    beam_size: int = 5  # the recipe's decoding; greedy is always reported too
    length_penalty: float = 1.0  # beam score = log-prob / length ** alpha (EOS counted)
    max_len_a: float = 1.2
    max_len_b: int = 10
    max_tokens: int = 8192  # source tokens per translation batch


@dataclass(frozen=True)
class Config:
    run_dir: str = "runs/multi30k"
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
