"""The value ranges and cross-key rules that types alone cannot express, each checked once.

A recipe passes all of them when it loads (``config.load_config``); a trained model's card
(``config.ModelCard``) passes those of the sections inference reads (data, model, decode), so a
training section that a later version of mt would reject does not stop a model from translating.
Code below the config trusts these. What depends on the machine or on files is checked where
that is known, before any work: the device and precision (``runtime.device``), an installed
extra (``train.progress``), what an export format supports (``export``). The data section's
rules are ``data_rules``.
"""

from __future__ import annotations

from mt_cli.config.data_rules import check_data
from mt_cli.config.options import OptionError, TranslateOptions
from mt_cli.config.sections import Config, DecodeConfig, ModelConfig, TokenizerConfig, TrainConfig
from mt_cli.errors import ConfigError, require

FREEZABLE = ("encoder", "embeddings", "decoder", "output")  # the choices of config.TrainConfig.freeze
_PROBABILITIES = (
    "dropout",
    "attention_dropout",
    "activation_dropout",
    "src_token_dropout",
    "tgt_token_dropout",
    "src_token_replace",
    "tgt_token_replace",
)


def check_recipe(cfg: Config) -> None:
    """Every rule, for a recipe that is about to train."""
    check_data(cfg.data)
    check_model(cfg.model)
    check_decode(cfg.decode, cfg.model)
    check_tokenizer(cfg.tokenizer, cfg.model)
    check_train(cfg.train)
    d, m, t, tok = cfg.data, cfg.model, cfg.train, cfg.tokenizer
    _check_options(cfg.decode, tok.src_vocab_size if tok.joint else tok.tgt_vocab_size)
    require(
        d.max_len + 2 <= m.max_positions,
        f"model.max_positions={m.max_positions} must be at least data.max_len + 2 = {d.max_len + 2}",
    )
    widest = -(-(d.max_len + 1) // t.pad_to_multiple) * t.pad_to_multiple  # a padded batch's width
    require(
        widest <= m.max_positions,
        f"train.pad_to_multiple={t.pad_to_multiple} pads data.max_len={d.max_len} sentences to {widest} "
        f"positions, more than model.max_positions={m.max_positions}",
    )
    require(
        t.max_tokens >= 2 * d.max_len,
        f"train.max_tokens={t.max_tokens} must hold one pair of data.max_len={d.max_len} tokens per side "
        f"(>= {2 * d.max_len})",
    )
    _check_term_loss(t.term_loss_weight, d.terms, tok.joint)


def _check_term_loss(weight: float, dictionary: str | None, joint: bool) -> None:
    require(weight > 0, f"train.term_loss_weight={weight} must be over 0 (1: a term's pieces weigh as any)")
    if weight != 1.0:
        require(dictionary is not None, "train.term_loss_weight weighs annotated terms: it needs data.terms")
        require(
            joint,
            "train.term_loss_weight finds a term's pieces by their ids on both sides: "
            "it needs tokenizer.joint",
        )


def check_model(m: ModelConfig) -> None:
    for name in ("d_model", "n_heads", "d_ff", "encoder_layers", "decoder_layers", "max_positions"):
        require(getattr(m, name) >= 1, f"model.{name}={getattr(m, name)} must be at least 1")
    require(
        m.d_model % m.n_heads == 0, f"model.d_model={m.d_model} is not divisible by model.n_heads={m.n_heads}"
    )
    require(m.d_model % 2 == 0, f"model.d_model={m.d_model} must be even (sinusoidal positions)")
    for name in _PROBABILITIES:
        require(0.0 <= getattr(m, name) < 1.0, f"model.{name}={getattr(m, name)} must be in [0, 1)")
    for side in ("src", "tgt"):
        dropped, replaced = getattr(m, f"{side}_token_dropout"), getattr(m, f"{side}_token_replace")
        require(
            dropped + replaced < 1.0,
            f"model.{side}_token_dropout={dropped} and model.{side}_token_replace={replaced} together "
            "must be under 1: the share of pieces changed",
        )


def check_decode(dec: DecodeConfig, m: ModelConfig) -> None:
    _check_options(dec)
    require(
        dec.max_len_a >= 0 and dec.max_len_b >= 1, "decode.max_len_a must be >= 0 and decode.max_len_b >= 1"
    )
    require(
        dec.max_tokens >= m.max_positions,
        f"decode.max_tokens={dec.max_tokens} must be >= model.max_positions={m.max_positions}",
    )


def _check_options(dec: DecodeConfig, vocabulary: int | None = None) -> None:
    """The decode section's beam and length penalty are the defaults of ``TranslateOptions``, so
    its rules are theirs, and the beam's limit by the target ``vocabulary`` too (given its size,
    as a recipe gives it); a ConfigError naming the key."""
    try:
        options = TranslateOptions(beam=dec.beam_size, length_penalty=dec.length_penalty)
        options.resolved(dec.beam_size, dec.length_penalty, "", vocabulary)
    except OptionError as err:
        key = "beam_size" if err.key == "beam" else err.key
        raise ConfigError(f"decode.{key}: {err}") from None


def check_tokenizer(tok: TokenizerConfig, m: ModelConfig) -> None:
    for name in ("src_vocab_size", "tgt_vocab_size"):
        require(getattr(tok, name) >= 8, f"tokenizer.{name}={getattr(tok, name)} must be at least 8")
    require(0.0 < tok.character_coverage <= 1.0, "tokenizer.character_coverage must be in (0, 1]")
    require(tok.sample_sentences >= 1, f"tokenizer.sample_sentences={tok.sample_sentences} must be positive")
    require(
        not tok.joint or tok.src_vocab_size == tok.tgt_vocab_size,
        f"tokenizer.joint needs one vocabulary size: tokenizer.src_vocab_size={tok.src_vocab_size} and "
        f"tokenizer.tgt_vocab_size={tok.tgt_vocab_size} differ",
    )
    for name in ("src_bpe_dropout", "tgt_bpe_dropout"):
        value = getattr(tok, name)
        require(0.0 <= value < 1.0, f"tokenizer.{name}={value} must be in [0, 1)")
        require(
            value == 0.0 or tok.model_type == "bpe",
            f"tokenizer.{name} needs tokenizer.model_type=bpe (got {tok.model_type!r})",
        )
    require(
        not m.share_embeddings or tok.src_vocab_size == tok.tgt_vocab_size,
        "model.share_embeddings needs tokenizer.src_vocab_size == tokenizer.tgt_vocab_size "
        f"(got {tok.src_vocab_size} and {tok.tgt_vocab_size})",
    )


def check_train(t: TrainConfig) -> None:
    for name in (
        "accum_steps",
        "keep_last",
        "save_every_steps",
        "log_every_steps",
        "max_bad_steps",
        "max_epochs",
        "pad_to_multiple",
    ):
        require(getattr(t, name) >= 1, f"train.{name}={getattr(t, name)} must be at least 1")
    for name in ("max_steps", "validate_every_steps", "patience", "warmup_steps", "average_last"):
        require(getattr(t, name) >= 0, f"train.{name}={getattr(t, name)} must be >= 0")
    require(t.lr > 0, f"train.lr={t.lr} must be positive")
    require(t.max_minutes >= 0, f"train.max_minutes={t.max_minutes} must be >= 0")
    require(
        t.dist_timeout_minutes > 0, f"train.dist_timeout_minutes={t.dist_timeout_minutes} must be positive"
    )
    require(0.0 <= t.label_smoothing < 1.0, f"train.label_smoothing={t.label_smoothing} must be in [0, 1)")
    require(t.rdrop >= 0, f"train.rdrop={t.rdrop} must be >= 0 (0: off)")
    require(t.clip_norm >= 0, f"train.clip_norm={t.clip_norm} must be >= 0 (0 disables)")
    require(t.weight_decay >= 0, f"train.weight_decay={t.weight_decay} must be >= 0")
    require(all(0 <= b < 1 for b in t.optimizer_betas), "train.optimizer_betas must each be in [0, 1)")
    require(
        t.average_last <= t.keep_last,
        f"train.average_last={t.average_last} cannot exceed train.keep_last={t.keep_last}",
    )
    check_schedule(t)
    check_warm_start(t)


def check_warm_start(t: TrainConfig) -> None:
    """``train.init_from`` and what goes with it; the parent itself is checked when training starts
    (``train.warm_start``), since that needs its files."""
    if t.init_from is None:
        for name in ("init_keep", "freeze"):
            require(
                not getattr(t, name),
                f"train.{name} needs train.init_from (a parent run to start from); remove it or set both",
            )
        return
    require(bool(t.init_from.strip()), "train.init_from is empty; give RUN or RUN:CHECKPOINT, or null")
    for name in ("init_keep", "freeze"):
        values = getattr(t, name)
        require(len(set(values)) == len(values), f"train.{name}={values} repeats a name")
    require(
        set(t.freeze) != set(FREEZABLE),
        f"train.freeze names every part ({', '.join(FREEZABLE)}): nothing would train",
    )
    # The parent's optimizer state covers every parameter in two groups; frozen ones leave the groups.
    require(
        "optimizer" not in t.init_keep or not t.freeze,
        "train.init_keep: [optimizer] cannot go with train.freeze (the parent's optimizer state covers "
        "every parameter); drop one of them",
    )
    # Cosine and linear decay end at this run's own horizon; an offset would skip part of the decay.
    require(
        "schedule" not in t.init_keep or t.schedule not in ("cosine", "linear"),
        f"train.init_keep: [schedule] continues a schedule, and train.schedule={t.schedule} decays over "
        "this run's own horizon; use inverse_sqrt, noam or constant, or drop schedule from train.init_keep",
    )


def check_schedule(t: TrainConfig) -> None:
    require(
        t.schedule == "constant" or t.warmup_steps >= 1,
        f"train.schedule={t.schedule} needs train.warmup_steps >= 1",
    )
    decays = t.schedule in ("cosine", "linear")
    if decays and t.lr_horizon == "max_minutes":
        require(
            t.max_minutes > 0,
            "train.lr_horizon=max_minutes needs a time budget: "
            f"set train.max_minutes > 0 (got {t.max_minutes})",
        )
    require(
        not decays or t.max_steps > t.warmup_steps or (t.lr_horizon == "max_minutes" and t.max_steps == 0),
        f"train.schedule={t.schedule} decays to zero at train.max_steps, which must exceed "
        f"train.warmup_steps={t.warmup_steps} (got {t.max_steps}; "
        "with train.lr_horizon=max_minutes, 0 means no cap)",
    )
