"""A SentencePiece model whose pieces are numbered by a vocabulary of its own: how a published
Marian (OPUS-MT) model tokenizes.

Marian's ids are not SentencePiece's: MarianTokenizer cuts a text into pieces with the side's
SentencePiece model (source.spm, target.spm), then looks each piece up in vocab.json (one table
for both sides in OPUS-MT), and a piece the table lacks is <unk>. ``VocabularyTokenizer`` does
exactly that, with the table renumbered into mt's special ids (``pretrained.marian_vocab``) and
Marian's ``>>xx<<`` language codes renamed to mt's ``<2xx>`` tags, and answers every question a
``Tokenizer`` answers, so training, decoding and export see one interface. The vocabulary file
is a JSON list of pieces, the piece of id i at index i.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm

from mt_cli.errors import CheckpointError
from mt_cli.specials import FIRST_WORD_ID, SPECIAL_PIECES, TAG_PATTERN, UNK_ID
from mt_cli.text.pieces import Tokenizer, load_processor, sampling_options, text_ids

_SPACE = "\u2581"  # SentencePiece's word boundary, "▁"


class VocabularyTokenizer(Tokenizer):
    """SentencePiece cuts, ``vocabulary`` numbers: id i is ``vocabulary[i]``; a piece cut by
    SentencePiece that the vocabulary lacks is UNK. The tags (``text.tags``) are the vocabulary's
    pieces of a tag's shape after the specials."""

    def __init__(self, processor: spm.SentencePieceProcessor, lang: str, vocabulary: Sequence[str]) -> None:
        super().__init__(processor, lang)
        self._pieces = list(vocabulary)
        self._ids: dict[str, int] = {}
        for index, piece in enumerate(self._pieces):
            self._ids.setdefault(piece, index)
        self.tags = {
            piece: index
            for index, piece in enumerate(self._pieces)
            if index >= FIRST_WORD_ID and TAG_PATTERN.fullmatch(piece) is not None
        }

    @classmethod
    def load_numbered(cls, path: str | Path, vocabulary: str | Path, lang: str) -> VocabularyTokenizer:
        """The SentencePiece model ``path`` numbered by the vocabulary file ``vocabulary``; a
        CheckpointError (one line) for either missing, unreadable or malformed."""
        again = "import the model again (`mt import`)"
        processor = load_processor(Path(path), missing=again, corrupt=again)
        return cls(processor, lang, read_vocabulary(Path(vocabulary)))

    @property
    def vocab_size(self) -> int:
        return len(self._pieces)

    def vocabulary(self) -> list[str]:
        return list(self._pieces)

    def to_pieces(self, ids: Iterable[int]) -> list[str]:
        return [self._pieces[int(i)] for i in ids]

    def to_ids(self, pieces: Iterable[str]) -> list[int]:
        return [self._ids.get(piece, UNK_ID) for piece in pieces]

    def piece_id(self, piece: str) -> int:
        return self._ids.get(piece, UNK_ID)

    def numbering(self) -> bytes:
        return write_vocabulary(self._pieces)

    def fingerprint(self) -> str:
        """SHA-256 of the SentencePiece model's bytes and the numbering."""
        digest = hashlib.sha256(self.model_bytes())
        digest.update(json.dumps(self._pieces, ensure_ascii=False).encode("utf-8"))
        return digest.hexdigest()

    def _cut(self, texts: list[str], dropout: float = 0.0) -> list[list[int]]:
        pieces = self.sp.encode(texts, out_type=str, **sampling_options(dropout))
        return [self.to_ids(one) for one in pieces]

    def decode(self, ids: Sequence[Sequence[int]]) -> list[str]:
        """Text as MarianTokenizer's ``batch_decode(..., skip_special_tokens=True)`` writes it
        (``convert_tokens_to_string``): SentencePiece joins the pieces, and a piece it does not know,
        which it passes through raw (a source-side piece of a shared vocabulary, ``▁Hund``), has its
        ``▁`` turned into spaces; the text is stripped. One difference: <unk> shows as "⁇" (as in
        every mt model) where MarianTokenizer drops it."""
        return [self.sp.decode(self.to_pieces(text_ids(seq))).replace(_SPACE, " ").strip() for seq in ids]


def read_vocabulary(path: Path) -> list[str]:
    """The pieces of a vocabulary file, by id; its first ids must be mt's specials."""
    if not path.is_file():
        raise CheckpointError(f"tokenizer vocabulary {path} is missing; import the model again (`mt import`)")
    try:
        pieces = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(
            f"tokenizer vocabulary {path} is unreadable ({err}); import the model again"
        ) from None
    if not isinstance(pieces, list) or not all(isinstance(piece, str) for piece in pieces):
        raise CheckpointError(f"tokenizer vocabulary {path} is not a JSON list of pieces")
    if tuple(pieces[:FIRST_WORD_ID]) != SPECIAL_PIECES:
        raise CheckpointError(
            f"tokenizer vocabulary {path} starts with {pieces[:FIRST_WORD_ID]}, "
            f"expected {list(SPECIAL_PIECES)}"
        )
    return pieces


def write_vocabulary(pieces: Sequence[str]) -> bytes:
    """The bytes of a vocabulary file for ``pieces`` (one per line of the JSON list, readable)."""
    return ("[\n" + ",\n".join(json.dumps(piece, ensure_ascii=False) for piece in pieces) + "\n]\n").encode()
