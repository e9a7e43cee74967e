"""An ensemble of mt engines as one ``Translator``: its model is an ``ensemble.Ensemble`` of the
members' Transformers (one cache each), everything else is the first member's.

Members must share their tokenizers exactly (the SHA-256 of each SentencePiece model's bytes),
which also makes their vocabularies equal; their architectures may differ. The first member's card
gives the languages and the decoding defaults (beam, length penalty, length limits).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mt_cli.decode.ensemble import Ensemble
from mt_cli.decode.translator import Translator
from mt_cli.errors import InputError
from mt_cli.model.transformer import Transformer


def check_same_tokenizers(members: Sequence[Translator]) -> None:
    """InputError naming every member whose tokenizers (or languages) differ from the first's."""
    first = members[0]
    differ = []
    for member in members[1:]:
        sides = [
            side
            for side, mine, theirs in zip(("source", "target"), member.tokenizers, first.tokenizers)
            if mine != theirs
        ]
        if (member.src_lang, member.tgt_lang) != (first.src_lang, first.tgt_lang):
            sides.append(f"languages {member.src_lang}-{member.tgt_lang}")
        if sides:
            differ.append(f"{member.origin} ({', '.join(sides)})")
    if differ:
        raise InputError(
            f"ensemble members must share their tokenizers exactly; these differ from {first.origin}: "
            + "; ".join(differ)
        )


def ensemble_of(members: Sequence[Translator], weights: Sequence[float] | None = None) -> Translator:
    """One engine that combines ``members`` per step, log-linearly with ``weights`` (default equal;
    normalised to sum to 1). The members must be on one device in one precision, as
    ``Translator.of`` with the same device and compute type leaves them."""
    if not members:
        raise InputError("an ensemble needs at least one model")
    if weights is not None:
        if len(weights) != len(members):
            raise InputError(f"{len(weights)} ensemble weights for {len(members)} models; give one per model")
        if not all(isinstance(w, (int, float)) and 0.0 < w < math.inf for w in weights):
            raise InputError(f"ensemble weights must be positive numbers, not {list(weights)}")
    if len(members) == 1 and weights is None:
        return members[0]
    check_same_tokenizers(members)
    models = []
    for member in members:
        if not isinstance(member.model, Transformer):
            raise InputError(f"{member.origin} is an ensemble already; list its members instead")
        models.append(member.model)
    first = members[0]
    model = Ensemble(models, weights).eval()
    return Translator(
        model,
        first.src_tok,
        first.tgt_tok,
        first.card,
        first.device,
        first.dtype,
        first.checkpoint,
        tuple(m.origin for m in members),
    )
