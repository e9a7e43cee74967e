"""Marian's vocabulary numbering -> mt's.

Every part of mt (batches, the loss, search, the tokenizers' check) takes the special ids from
``specials``: pad 0, <unk> 1, <s> 2, </s> 3, pieces from 4. OPUS-MT numbers them </s> 0, <unk> 1,
pad last, and has no <s>. Rather than teach every part another numbering, an import renumbers the
vocabulary into mt's: an *order* is a (V_mt,) index whose entry i is the Marian id that mt id i
takes its embedding row, output row and bias from. mt's <s> takes Marian's decoder start row (the
pad row for OPUS-MT): whichever of <s> or pad decoding starts from, it feeds the vector Marian
feeds. So the renumbered vocabulary has one row more than Marian's when the start symbol is pad,
and the pad and <s> columns of the logits are one logit twice (Marian's generate bans pad; see
``pretrained`` for what decoding must do). The tokenizer of an import must map pieces to ids with
the same order (``order.tolist().index(marian_id)``, or the inverse ``marian_to_mt``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

import torch
from torch import Tensor

from mt_cli.errors import ConfigError
from mt_cli.specials import BOS_ID, EOS_ID, FIRST_WORD_ID, PAD_ID, SPECIAL_PIECES, UNK_ID, target_tag

_LANGUAGE_CODE = re.compile(r">>([A-Za-z_]+)<<")  # MarianTokenizer's target-language token


def mt_order(size: int, pad: int, unk: int, eos: int, start: int) -> Tensor:
    """(V_mt,) Marian ids in mt's order: pad, unk, the decoder start (as <s>), eos, then every
    other Marian id in its own order. A vocabulary already in mt's layout (mt's own export) gives
    the identity."""
    specials = {PAD_ID: pad, UNK_ID: unk, BOS_ID: start, EOS_ID: eos}
    if len({pad, unk, eos}) != 3:
        raise ConfigError(
            f"cannot import a vocabulary whose pad ({pad}), <unk> ({unk}) and </s> ({eos}) share ids"
        )
    for name, marian_id in (("pad", pad), ("<unk>", unk), ("</s>", eos), ("decoder start", start)):
        if not 0 <= marian_id < size:
            raise ConfigError(f"cannot import: the {name} id {marian_id} is outside the vocabulary of {size}")
    head = [specials[i] for i in range(FIRST_WORD_ID)]  # (4,)
    used = set(head)
    return torch.tensor(head + [i for i in range(size) if i not in used], dtype=torch.long)  # (V_mt,)


def marian_to_mt(order: Tensor) -> dict[int, int]:
    """Marian id -> mt id, for a tokenizer; a Marian id used twice (pad as <s>) maps to its first slot."""
    mapping: dict[int, int] = {}
    for mt_id, marian_id in enumerate(order.tolist()):
        mapping.setdefault(marian_id, mt_id)
    return mapping


def language_code(piece: str) -> str | None:
    """The language of a Marian target-language token (``>>fr<<`` -> ``fr``), else None."""
    match = _LANGUAGE_CODE.fullmatch(piece)
    return match[1] if match is not None else None


def mt_pieces(table: Mapping[str, int], order: Tensor) -> list[str]:
    """The pieces of mt's vocabulary, by mt id, for Marian's ``table`` (vocab.json: piece -> id)
    renumbered by ``order``: the four specials get mt's names (the start symbol becomes ``<s>``),
    and a language code ``>>xx<<`` becomes mt's tag ``<2xx>`` (an id with both names, as mt's own
    export writes, keeps the tag)."""
    names: dict[int, str] = {}
    for piece, marian_id in table.items():
        code = language_code(piece)
        if code is not None:
            names[marian_id] = target_tag(code)
        else:
            names.setdefault(marian_id, piece)
    pieces = []
    for mt_id, marian_id in enumerate(order.tolist()):
        if mt_id < FIRST_WORD_ID:
            pieces.append(SPECIAL_PIECES[mt_id])
        elif marian_id in names:
            pieces.append(names[marian_id])
        else:
            raise ConfigError(f"cannot import: vocab.json has no piece for id {marian_id}")
    repeated = next((piece for piece, n in Counter(pieces).items() if n > 1), None)
    if repeated is not None:
        raise ConfigError(f"cannot import: the piece {repeated!r} would have two ids in mt's numbering")
    return pieces
