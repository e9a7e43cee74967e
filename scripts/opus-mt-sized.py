# Run from the repository root:
#   python scripts/opus-mt-sized.py /tmp/opus-mt-sized
"""A Marian directory the size of Helsinki-NLP/opus-mt-de-en, for speed and memory where the hub is
out of reach: its config.json's option values exactly (74M parameters: 6+6 layers, d512, 8 heads,
FFN 2048, swish, one shared vocabulary of 58,101), random weights (transformers' own init), and
MarianTokenizer files made from SentencePiece models trained on Multi30k, with vocab.json padded
to 58,101 pieces as OPUS-MT's is. ``mt import`` reads it like the real one; the weights are random,
so only timings and memory mean anything (outputs run to the length limit: 1.2 x source + 10
pieces, a little longer than real translations).

docs/benchmarks.md ("A 74M OPUS-MT-sized model") has the commands run on it and what they gave.
"""

import io
import json
import sys
from pathlib import Path

import sentencepiece as spm
import torch
import transformers

from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K

VOCAB = 58101  # opus-mt-de-en's vocab_size
OPUS_MT_DE_EN = {  # its config.json, the keys MarianConfig reads
    "vocab_size": VOCAB,
    "decoder_vocab_size": VOCAB,
    "d_model": 512,
    "encoder_layers": 6,
    "decoder_layers": 6,
    "encoder_attention_heads": 8,
    "decoder_attention_heads": 8,
    "encoder_ffn_dim": 2048,
    "decoder_ffn_dim": 2048,
    "activation_function": "swish",
    "scale_embedding": True,
    "share_encoder_decoder_embeddings": True,
    "tie_word_embeddings": True,
    "max_position_embeddings": 512,
    "pad_token_id": VOCAB - 1,
    "eos_token_id": 0,
    "bos_token_id": 0,
    "decoder_start_token_id": VOCAB - 1,
    "forced_eos_token_id": 0,
    "dropout": 0.1,
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
    "static_position_embeddings": True,
}


def sentencepiece(lines: list[str], path: Path) -> spm.SentencePieceProcessor:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=6000,
        model_type="unigram",
        minloglevel=2,
    )
    path.write_bytes(model.getvalue())
    return spm.SentencePieceProcessor(model_file=str(path))


def main(out: Path) -> None:
    out.mkdir(parents=True)
    de = read_lines(SHIPPED_MULTI30K / "train.de.gz")
    en = read_lines(SHIPPED_MULTI30K / "train.en.gz")
    models = [sentencepiece(de, out / "source.spm"), sentencepiece(en, out / "target.spm")]
    pieces = sorted(
        {
            m.id_to_piece(i)
            for m in models
            for i in range(m.get_piece_size())
            if not (m.is_control(i) or m.is_unknown(i))
        }
    )
    filler = [f"▁unused{i}" for i in range(VOCAB - 3 - len(pieces))]
    table = ["</s>", "<unk>", *pieces, *filler, "<pad>"]
    (out / "vocab.json").write_text(json.dumps({piece: i for i, piece in enumerate(table)}), encoding="utf-8")
    transformers.MarianTokenizer(
        str(out / "source.spm"),
        str(out / "target.spm"),
        str(out / "vocab.json"),
        source_lang="de",
        target_lang="en",
    ).save_pretrained(out)
    torch.manual_seed(0)
    model = transformers.MarianMTModel(transformers.MarianConfig(**OPUS_MT_DE_EN))
    model.save_pretrained(out)
    generation = {"bad_words_ids": [[VOCAB - 1]], "decoder_start_token_id": VOCAB - 1, "num_beams": 4,
                  "max_length": 512, "eos_token_id": 0, "pad_token_id": VOCAB - 1}  # fmt: skip
    (out / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    print(f"{out}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
