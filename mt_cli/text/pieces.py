"""One language's SentencePiece model, with the project's special ids and its tags.

Kept free of torch, batches and ``datasets`` so that ``mt translate`` imports it cheaply; training
and reuse live in ``text.tokenizer`` (which exports ``Tokenizer`` too).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm

from mt_cli.errors import CheckpointError
from mt_cli.specials import BOS_ID, EOS_ID, PAD_ID, TAG_PATTERN, UNK_ID

# SentencePiece puts user-defined symbols right after the specials (ids 4, 5, ...), before any
# learned piece, and a learned piece there is a short merge (BPE) or a frequent character
# (unigram), never "<word>": so the pieces of that shape from id 4 on are the run's tags.
_FIRST_USER_ID = 4


class Tokenizer:
    """One language's SentencePiece model, with the project's special-id conventions.

    It answers every piece and id question (``vocabulary``, ``to_pieces``, ``to_ids``,
    ``piece_id``, ``model_bytes``, ``fingerprint``): no module outside ``text`` touches ``sp``.
    """

    def __init__(self, processor: spm.SentencePieceProcessor, lang: str) -> None:
        self.sp = processor
        self.lang = lang
        self.tags: dict[str, int] = {}  # user-defined symbols (``text.tags``): piece -> id
        for index in range(_FIRST_USER_ID, processor.get_piece_size()):
            piece = processor.id_to_piece(index)
            if TAG_PATTERN.fullmatch(piece) is None:
                break
            self.tags[piece] = index

    @classmethod
    def load(cls, path: str | Path, lang: str) -> Tokenizer:
        path = Path(path)
        processor = load_processor(
            path,
            missing="run `mt prepare` or `mt train` to create it",
            corrupt="restore it from a copy of the run (its checkpoints were trained with it), or, in a "
            "run without checkpoints, delete it and rerun `mt prepare`",
        )
        ids = (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id())
        if ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise CheckpointError(
                f"tokenizer model {path} has special ids pad/unk/bos/eos={ids}, expected 0/1/2/3; "
                "retrain it with `mt prepare`"
            )
        return cls(processor, lang)

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def vocabulary(self) -> list[str]:
        """Every piece, in id order (an exported vocabulary whose ids are mt's)."""
        return self.sp.id_to_piece(list(range(self.sp.get_piece_size())))

    def to_pieces(self, ids: Iterable[int]) -> list[str]:
        """The piece of each id, specials included (``"</s>"`` for EOS); no cutting, no dropping."""
        return self.sp.id_to_piece(list(ids))

    def to_ids(self, pieces: Iterable[str]) -> list[int]:
        """The id of each piece; a piece not in the vocabulary is UNK."""
        return self.sp.piece_to_id(list(pieces))

    def piece_id(self, piece: str) -> int:
        """The id of one piece (UNK if the vocabulary lacks it)."""
        return self.sp.piece_to_id(piece)

    @functools.cached_property
    def word_continuations(self) -> tuple[int, ...]:
        """The ids of the pieces that, written after a word, lengthen it ("s" after "▁dog"): no
        word-start mark and a letter or digit first."""
        return tuple(i for i, piece in enumerate(self.vocabulary()) if piece[:1].isalnum())

    def model_bytes(self) -> bytes:
        """The SentencePiece model as saved (what an export writes beside its weights)."""
        return self.sp.serialized_model_proto()

    def numbering(self) -> bytes | None:
        """The vocabulary file that numbers the pieces (``text.vocabulary``); None: SentencePiece's ids."""
        return None

    def fingerprint(self) -> str:
        """SHA-256 of the model's bytes: equal exactly when two tokenizers are the same."""
        return hashlib.sha256(self.model_bytes()).hexdigest()

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Piece ids without BOS/EOS: adding them is the caller's decision (see data.py).

        Leading tags (``text.tags``) become their own ids.
        """
        if not self.tags:
            return self._cut(list(texts))
        heads, bodies = self._split_tags(texts)
        return [head + ids for head, ids in zip(heads, self._cut(bodies), strict=True)]

    def _cut(self, texts: list[str], dropout: float = 0.0) -> list[list[int]]:
        """The ids of each text's pieces; with ``dropout``, a sampled cut (``encode_with_dropout``)."""
        return self.sp.encode(texts, out_type=int, **sampling_options(dropout))

    def _split_tags(self, texts: Sequence[str]) -> tuple[list[list[int]], list[str]]:
        """Each text's leading tags as ids, and the text after them. SentencePiece alone would cut
        "<2en> Ein Hund" into "▁", "<2en>", "▁Ein", ...: a "▁" piece before every tag."""
        heads, bodies = [], []
        for text in texts:
            head = []
            while text.startswith("<"):
                word, _, rest = text.partition(" ")
                if word not in self.tags:
                    break
                head.append(self.tags[word])
                text = rest
            heads.append(head)
            bodies.append(text)
        return heads, bodies

    def encode_with_dropout(self, texts: list[str], dropout: float, seed: int) -> list[list[int]]:
        """BPE-dropout (Provilkov et al., 2020): each merge is skipped with probability ``dropout``.

        The same (texts, dropout, seed) always gives the same pieces, so a resumed epoch sees the
        segmentation it started with.
        """
        spm.set_random_generator_seed(seed % 2**32)
        heads, bodies = self._split_tags(texts) if self.tags else ([[]] * len(texts), list(texts))
        sampled = self._cut(bodies, dropout)
        return [head + ids for head, ids in zip(heads, sampled, strict=True)] if self.tags else sampled

    def decode(self, ids: Sequence[Sequence[int]]) -> list[str]:
        """Text for each id sequence: cut at the first EOS, PAD and BOS dropped.

        UNK is kept (it renders as " ⁇ ") so that a reader can see something was unknown.
        """
        return self.sp.decode([text_ids(seq) for seq in ids])

    def pieces(self, text: str) -> list[str]:
        """Surface pieces of ``text`` (labels for attention plots)."""
        return self.sp.encode(text, out_type=str)


def load_processor(path: Path, missing: str, corrupt: str) -> spm.SentencePieceProcessor:
    """The SentencePiece model at ``path``; a CheckpointError ending with what to do when it is
    ``missing`` or ``corrupt``."""
    if not path.is_file():
        raise CheckpointError(f"tokenizer model {path} is missing; {missing}")
    processor = spm.SentencePieceProcessor()
    try:
        processor.Load(model_file=str(path))
    except (RuntimeError, OSError) as err:
        raise CheckpointError(
            f"tokenizer model {path} is corrupt ({str(err).splitlines()[0]}); {corrupt}"
        ) from None
    return processor


def sampling_options(dropout: float) -> dict[str, Any]:
    """SentencePiece's encode options for BPE-dropout at rate ``dropout`` (none at 0): one thread,
    since the sampled pieces depend on how the texts are split among threads."""
    return {"enable_sampling": True, "alpha": dropout, "num_threads": 1} if dropout else {}


def text_ids(ids: Sequence[int]) -> list[int]:
    """The ids of an output that become text: up to the first EOS, without PAD and BOS."""
    out = []
    for i in map(int, ids):
        if i == EOS_ID:
            break
        if i not in (PAD_ID, BOS_ID):
            out.append(i)
    return out
