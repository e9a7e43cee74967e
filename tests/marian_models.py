"""Marian models saved as transformers saves OPUS-MT ones, built here because the hub is out of reach:
``MarianMTModel(MarianConfig(...))`` with opus-mt-de-en's option values (width and depth cut),
MarianTokenizer files made from two small SentencePiece models and a ``vocab.json`` whose ids are
not SentencePiece's (</s> 0, <unk> 1, the pieces of both models shuffled, pad last, as OPUS-MT),
briefly trained on Multi30k so that its outputs end and differ."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import sentencepiece as spm
import torch

from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K

PIECES = 240  # per SentencePiece model


def multi30k(split: str, lang: str) -> list[str]:
    return read_lines(SHIPPED_MULTI30K / f"{split}.{lang}.gz")


def _sentencepiece(lines: list[str], path: Path) -> spm.SentencePieceProcessor:
    """A unigram model with SentencePiece's default specials (<unk> 0, <s> 1, </s> 2), as OPUS-MT's."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=PIECES,
        model_type="unigram",
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
    )
    path.write_bytes(model.getvalue())
    return spm.SentencePieceProcessor(model_file=str(path))


def marian_vocabulary(
    models: list[spm.SentencePieceProcessor], codes: list[str], seed: int = 0
) -> dict[str, int]:
    """Marian's table: </s> 0, <unk> 1, language codes, the models' other pieces shuffled, <pad> last."""
    pieces = sorted(
        {
            model.id_to_piece(i)
            for model in models
            for i in range(model.get_piece_size())
            if not (model.is_control(i) or model.is_unknown(i))
        }
    )
    random.Random(seed).shuffle(pieces)
    table = ["</s>", "<unk>", *(f">>{code}<<" for code in codes), *pieces, "<pad>"]
    return {piece: i for i, piece in enumerate(table)}


def opus_mt_config(vocab_size: int, **changes: Any) -> dict[str, Any]:
    """Helsinki-NLP/opus-mt-de-en's config.json with width, depth and vocabulary cut."""
    config = {
        "model_type": "marian",
        "architectures": ["MarianMTModel"],
        "vocab_size": vocab_size,
        "decoder_vocab_size": vocab_size,
        "d_model": 64,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "encoder_attention_heads": 4,
        "decoder_attention_heads": 4,
        "encoder_ffn_dim": 128,
        "decoder_ffn_dim": 128,
        "activation_function": "swish",
        "scale_embedding": True,
        "share_encoder_decoder_embeddings": True,
        "tie_word_embeddings": True,
        "max_position_embeddings": 512,
        "pad_token_id": vocab_size - 1,
        "eos_token_id": 0,
        "bos_token_id": 0,
        "decoder_start_token_id": vocab_size - 1,
        "forced_eos_token_id": 0,
        "dropout": 0.1,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        "static_position_embeddings": True,
        "normalize_before": False,
        "normalize_embedding": False,
    }
    return config | changes


def save_marian(
    directory: Path, steps: int = 400, codes: tuple[str, ...] = (), seed: int = 0, init_std: float = 0.02
) -> Path:
    """A briefly trained de->en Marian model with its tokenizer and generation config in ``directory``.
    ``steps=0`` with a large ``init_std`` (transformers' default is 0.02) gives a random model whose
    outputs vary, pieces of both SentencePiece models among them."""
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    de, en = multi30k("train", "de")[:6000], multi30k("train", "en")[:6000]
    source = _sentencepiece(de, directory / "source.spm")
    target = _sentencepiece(en, directory / "target.spm")
    table = marian_vocabulary([source, target], list(codes), seed)
    (directory / "vocab.json").write_text(json.dumps(table), encoding="utf-8")
    tokenizer = transformers.MarianTokenizer(
        source_spm=str(directory / "source.spm"),
        target_spm=str(directory / "target.spm"),
        vocab=str(directory / "vocab.json"),
        source_lang="de",
        target_lang="en",
    )
    tokenizer.save_pretrained(directory)
    config = opus_mt_config(len(table), init_std=init_std)
    known = {key: value for key, value in config.items() if key not in ("architectures", "model_type")}
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(transformers.MarianConfig(**known))
    _train(model, tokenizer, de, en, steps)
    with torch.no_grad():  # a buffer training leaves at zero; OPUS-MT's carry Marian's output bias
        model.final_logits_bias.normal_(std=0.1)
    model.eval().save_pretrained(directory)
    pad = config["pad_token_id"]
    generation = {
        "bad_words_ids": [[pad]],
        "decoder_start_token_id": pad,
        "eos_token_id": 0,
        "forced_eos_token_id": 0,
        "max_length": 512,
        "num_beams": 4,
        "pad_token_id": pad,
    }
    (directory / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    return directory


def _train(model: Any, tokenizer: Any, de: list[str], en: list[str], steps: int) -> None:
    """Teacher-forced steps on batches of 64 pairs (encoded once): enough for outputs that end and differ."""
    encoded = tokenizer(de, text_target=en)
    pairs = list(zip(encoded["input_ids"], encoded["labels"], strict=True))
    pad = tokenizer.pad_token_id
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    generator = random.Random(0)
    model.train()
    for _ in range(steps):
        batch = generator.sample(pairs, 64)
        src = _padded([s for s, _ in batch], pad)  # (B, S)
        labels = _padded([t for _, t in batch], -100)  # (B, T)
        loss = model(input_ids=src, attention_mask=(src != pad).long(), labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def _padded(rows: list[list[int]], pad: int) -> torch.Tensor:
    width = max(len(row) for row in rows)
    return torch.tensor([row + [pad] * (width - len(row)) for row in rows])  # (B, width)


def generate(
    tokenizer: Any, marian: Any, lines: list[str], beams: int, alpha: float, card: Any
) -> tuple[list[str], list[list[int]]]:
    """transformers' translations of ``lines`` (``generate``, then ``batch_decode`` skipping special
    tokens, as OPUS-MT's model cards show) and the ids generated, each line with mt's length limit
    (``hypotheses.output_limit``): lines grouped by that limit, batches of up to 100."""
    from collections import defaultdict

    from mt_cli.decode.hypotheses import output_limit

    d = card.decode
    groups: dict[int, list[int]] = defaultdict(list)
    for index, ids in enumerate(tokenizer(lines)["input_ids"]):
        groups[output_limit(len(ids), d.max_len_a, d.max_len_b, card.model.max_positions)].append(index)
    texts, rows = [""] * len(lines), [[] for _ in lines]
    for limit, indices in groups.items():
        for start in range(0, len(indices), 100):
            chunk = indices[start : start + 100]
            batch = tokenizer([lines[i] for i in chunk], return_tensors="pt", padding=True)
            with torch.no_grad():
                found = marian.generate(
                    **batch, num_beams=beams, length_penalty=alpha, early_stopping=beams > 1,
                    max_new_tokens=limit, max_length=None,
                )  # fmt: skip
            decoded = tokenizer.batch_decode(found, skip_special_tokens=True)
            for i, text, ids in zip(chunk, decoded, found.tolist(), strict=True):
                texts[i], rows[i] = text, ids
    return texts, rows


def fine_tune_recipe(path: Path, pairs: int, steps: int, validate_every: int) -> Path:
    """A warm start's recipe with no model or tokenizer section (they are the parent's): Multi30k,
    ``pairs`` training pairs, ``steps`` updates, validated (loss only) every ``validate_every``."""
    path.write_text(
        f"data: {{source: multi30k, max_len: 40, train_limit: {pairs}}}\n"
        f"train: {{max_tokens: 2048, lr: 3.0e-4, warmup_steps: 10, max_steps: {steps},"
        f" validate_every_steps: {validate_every}, val_bleu: false, test_at_end: false, average_last: 0,"
        " log_every_steps: 10}\n",
        encoding="utf-8",
    )
    return path
