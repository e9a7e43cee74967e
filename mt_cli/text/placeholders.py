"""Placeholders: pieces of a sentence that must come out exactly as they went in (``{{user.name}}``,
``{0}``, ``%s``, ``%1$s``, ``<x/>``-style tags, URLs, e-mail addresses), hidden from the model
behind symbols it keeps whole and put back after translation.

``mask`` replaces each such piece with ``<ph1>``, ``<ph2>``, ... in the order they appear (at
most ``SYMBOLS`` a sentence; the rest stay as text). A model trained with ``data.placeholders``
has these symbols in both tokenizers (one piece each, never cut) and has learnt to carry them to
where they belong; ``restore`` puts the original pieces back where the translation has them, in
whatever order the model moved them to. A translation that lost a symbol gets its piece back at
the place its share of the source points to; a symbol written twice keeps its first place, and
one the source never had is dropped (also from a line that had none). ``Restored.repairs``
counts what was mended, so a caller can report it: nothing is lost or doubled silently.

``mask_pair`` and ``sprinkle`` are the training side: the first masks the pieces a training pair
has on both sides (a URL in a source and in its reference), the second puts symbols into a pair at
corresponding places (the same share of each side's words), so that the model learns to carry them.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

SYMBOLS = 16  # placeholders a sentence may hold: <ph1> ... <ph16>
_PIECES = re.compile(
    "|".join(
        (
            r"\{\{[^{}\n]{0,200}\}\}",  # {{user.name}}: Mustache, Jinja, Angular
            r"\{[\w.:!\[\]-]{0,100}\}",  # {0}, {name}, {user.name}, {0:>8}: Python, ICU, .NET
            r"%(?:\d+\$)?[-+ 0#]*\d*(?:\.\d+)?[sdifuxXeEgGcop]",  # printf: %s, %d, %1$s, %.2f
            r"%\([\w.]+\)[sdifr]",  # Python's %(name)s
            r"</?[A-Za-z][\w.:-]*(?:\s[^<>]{0,200})?/?>",  # <x/>, <b>, </b>, <g id="1">
            r"\b(?:https?|ftp)://[^\s<>\"]*[^\s<>\".,;:!?)\]'’]",  # URLs, less a closing stop
            r"\bwww\.[^\s<>\"]*[^\s<>\".,;:!?)\]'’]",
            r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b",  # e-mail addresses
        )
    )
)
_SYMBOL = re.compile(r"<ph(\d{1,2})>")


def symbol(number: int) -> str:
    """The symbol of the ``number``-th placeholder of a sentence (from 1)."""
    return f"<ph{number}>"


def symbols() -> list[str]:
    """Every placeholder symbol, in order: what the tokenizers of a run with placeholders hold."""
    return [symbol(number) for number in range(1, SYMBOLS + 1)]


@dataclass(frozen=True)
class Masked:
    """A sentence with its placeholders replaced (``text``), the pieces they hide (the k-th
    symbol's is ``pieces[k - 1]``) and where each stood, as a share of the masked text (0-1)."""

    text: str
    pieces: tuple[str, ...]
    shares: tuple[float, ...]


@dataclass(frozen=True)
class Restored:
    """A translation with its placeholders back, and how many were mended: put back where the
    model lost them, written twice, or never in the source."""

    text: str
    repairs: int


def mask(sentence: str) -> Masked:
    """``sentence`` with its first ``SYMBOLS`` placeholder pieces replaced by symbols."""
    pieces: list[str] = []
    starts: list[int] = []
    out: list[str] = []
    last = written = 0  # read up to in the sentence; characters of the masked text so far
    for found in _PIECES.finditer(sentence):
        if len(pieces) == SYMBOLS:
            break
        out.append(sentence[last : found.start()])
        written += found.start() - last
        starts.append(written)
        pieces.append(found.group())
        out.append(symbol(len(pieces)))
        written += len(out[-1])
        last = found.end()
    if not pieces:
        return Masked(sentence, (), ())
    out.append(sentence[last:])
    text = "".join(out)
    return Masked(text, tuple(pieces), tuple(start / max(1, len(text)) for start in starts))


def restore(translation: str, masked: Masked) -> Restored:
    """``translation`` of ``masked.text`` with each symbol replaced by its piece (see the module)."""
    if not masked.pieces and "<ph" not in translation:
        return Restored(translation, 0)
    seen: set[int] = set()
    repairs = 0

    def first_of_each(found: re.Match[str]) -> str:
        nonlocal repairs
        number = int(found.group(1))
        if not 1 <= number <= len(masked.pieces) or number in seen:
            repairs += 1
            return ""
        seen.add(number)
        return found.group()

    text = _SYMBOL.sub(first_of_each, translation)
    missing = [number for number in range(1, len(masked.pieces) + 1) if number not in seen]
    after = 0  # each after the one put back before it: the lost ones keep their source order
    for number in missing:  # as symbols, so that no piece's own spaces count as word boundaries
        text, after = _inserted(text, symbol(number), masked.shares[number - 1], after)
    if repairs or missing:
        text = " ".join(text.split())
    text = _SYMBOL.sub(lambda found: masked.pieces[int(found.group(1)) - 1], text)
    return Restored(text, repairs + len(missing))


def _inserted(text: str, piece: str, share: float, after: int) -> tuple[str, int]:
    """``piece`` put into ``text`` at the word boundary nearest to ``share`` of its length, not
    before character ``after``; the new text and where the piece ends in it."""
    bounds = [0, *(m.start() for m in re.finditer(r"(?<=\S)\s", text)), len(text)]
    at = min((bound for bound in bounds if bound >= after), key=lambda bound: abs(bound - share * len(text)))
    head = f"{text[:at]} " if text[:at] else ""
    return f"{head}{piece} {text[at:]}".rstrip(), len(head) + len(piece)


def mask_pair(source: str, target: str) -> tuple[str, str] | None:
    """A training pair with the placeholder pieces of its source masked on both sides, each piece
    by the same symbol; None where the source has none, or the target does not hold each of them
    as often as the source."""
    masked = mask(source)
    if not masked.pieces or any(target.count(piece) != masked.pieces.count(piece) for piece in masked.pieces):
        return None
    numbers: dict[str, list[int]] = {}
    for number, piece in enumerate(masked.pieces, start=1):
        numbers.setdefault(piece, []).append(number)
    pattern = re.compile("|".join(re.escape(piece) for piece in sorted(numbers, key=len, reverse=True)))
    return masked.text, pattern.sub(lambda found: symbol(numbers[found.group()].pop(0)), target)


def sprinkle(source: str, target: str, rng: random.Random) -> tuple[str, str]:
    """A training pair with one to three symbols put in at corresponding places: each at a
    random share of the pair, after that share of each side's words (rounded), numbered in order."""
    src_words, tgt_words = source.split(), target.split()
    shares = sorted(rng.random() for _ in range(rng.randint(1, 3)))
    places = [(round(share * len(src_words)), round(share * len(tgt_words))) for share in shares]
    for number, (src_at, tgt_at) in reversed(list(enumerate(places, start=1))):  # from the end
        src_words.insert(src_at, symbol(number))
        tgt_words.insert(tgt_at, symbol(number))
    return " ".join(src_words), " ".join(tgt_words)
