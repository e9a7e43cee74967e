"""The files of an exported Marian directory besides the weights (``export.huggingface``):
MarianTokenizer's (both SentencePiece models, one vocabulary per side in which every piece keeps
mt's id, so Marian's ids are mt's) and the model's README.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from mt_cli.disk.layout import ExportFiles
from mt_cli.specials import target_tag
from mt_cli.text.tags import tagged_targets

if TYPE_CHECKING:
    from mt_cli.config.card import ModelCard
    from mt_cli.text.pieces import Tokenizer
    from mt_cli.trained import TrainedModel


def save_tokenizer(trained: TrainedModel, model_dir: Path) -> None:
    """MarianTokenizer's files: both SentencePiece models, one vocabulary per side, its config."""
    from transformers import MarianTokenizer

    card = trained.card
    codes = marian_language_codes(card, trained.src_tok)
    for tokenizer, spm, vocab, aliases in (
        (trained.src_tok, ExportFiles.SOURCE_SPM, "vocab.json", codes),
        (trained.tgt_tok, ExportFiles.TARGET_SPM, "target_vocab.json", {}),
    ):
        (model_dir / spm).write_bytes(tokenizer.model_bytes())
        ids = piece_ids(tokenizer) | aliases
        (model_dir / vocab).write_text(json.dumps(ids), encoding="utf-8")
    MarianTokenizer(
        source_spm=str(model_dir / ExportFiles.SOURCE_SPM),
        target_spm=str(model_dir / ExportFiles.TARGET_SPM),
        vocab=str(model_dir / "vocab.json"),
        target_vocab_file=str(model_dir / "target_vocab.json"),
        separate_vocabs=True,
        source_lang=card.data.src_lang,
        target_lang=card.data.tgt_lang,
        # <s> starts every generated sequence: as a special token, decoding skips it.
        bos_token="<s>",
        model_max_length=card.model.max_positions,
        clean_up_tokenization_spaces=False,
    ).save_pretrained(model_dir)


def marian_language_codes(card: ModelCard, tokenizer: Tokenizer) -> dict[str, int]:
    """``>>en<<`` for the id of ``<2en>``, per target language of a model with target tags.

    A text that starts with ``>>xx<<`` is how Marian's multilingual models are told the target:
    MarianTokenizer takes that code off the text and looks it up in the vocabulary whole. mt's
    own tag typed into the text would not do: SentencePiece puts a word-start piece before it.
    """
    return {marian_code(lang): tokenizer.piece_id(target_tag(lang)) for lang in tagged_targets(card.data)}


def marian_code(lang: str) -> str:
    """Marian's name for a target language at the start of a text: ``>>en<<``."""
    return f">>{lang}<<"


def piece_ids(tokenizer: Tokenizer) -> dict[str, int]:
    """Every piece of the SentencePiece model with its own id, so Marian's ids are mt's."""
    return {piece: i for i, piece in enumerate(tokenizer.vocabulary())}


def readme(card: ModelCard) -> str:
    src, tgt = card.data.src_lang, card.data.tgt_lang
    return f"""---
language:
- {src}
- {tgt}
library_name: transformers
pipeline_tag: translation
tags: [translation, marian, mt-cli]
---

# {src}-{tgt} Transformer trained with mt

A {card.model.encoder_layers}+{card.model.decoder_layers}-layer post-norm Transformer
(d_model {card.model.d_model}) exported from an mt run as a `MarianMTModel`.

```python
from transformers import MarianMTModel, MarianTokenizer

model = MarianMTModel.from_pretrained("path/to/this/directory")
tokenizer = MarianTokenizer.from_pretrained("path/to/this/directory")
batch = tokenizer(["..."], return_tensors="pt", padding=True)
out = model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=64)
print(tokenizer.batch_decode(out, skip_special_tokens=True))
```

`AutoModelForSeq2SeqLM` and `AutoTokenizer` load it too; `pipeline("translation", ...)` exists
in transformers 4 only.

In float32, `generate` gives mt's translations when `max_new_tokens` is mt's limit for the
sentence, `floor({card.decode.max_len_a} * source pieces with </s>) + {card.decode.max_len_b}`:
greedy (`num_beams=1`) and beam search with this directory's generation config
(`num_beams={card.decode.beam_size}`, length penalty `length ** {card.decode.length_penalty}`,
as in mt).
Sources longer than {card.model.max_positions - 1} pieces need `truncation=True`.
{_tag_note(card)}"""


def _tag_note(card: ModelCard) -> str:
    """What a user must type for a model trained with target-language tags: Marian's ``>>xx<<``
    first, as for Marian's own multilingual models (``marian_language_codes``)."""
    languages = tagged_targets(card.data)
    if not languages:
        return ""
    codes = ", ".join(f"`{marian_code(lang)}`" for lang in languages)
    return (
        f"\nThe model writes the language its text begins with, as Marian's multilingual models: start "
        f"every text with {codes} (e.g. `{marian_code(card.data.tgt_lang)} ...`); mt adds it itself "
        "(`--tgt-lang`).\n"
    )
