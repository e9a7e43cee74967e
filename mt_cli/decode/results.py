"""What every engine returns: typed, frozen, free of torch (the options it decodes with are
``config.options``).

Scores are natural logarithms. A translation's ``score`` is the number its search ranks by: the
summed log-probability of its pieces and EOS, divided by ``length ** length_penalty`` (length
counting EOS; see ``hypotheses.length_penalty``), for greedy search, beam search and samples alike.
A ``Score`` of a given target is the plain sum, never length-normalised. Formatting these (Moses
n-best, Pharaoh, JSON) is the command line's business, not this module's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# (source word, target word) pairs, 0-based over whitespace-separated words, sorted.
Alignment = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Hypothesis:
    """One translation of a line: detokenized text, its target pieces (without EOS), its score
    (see the module docstring) and, when asked for, its word alignment to the source."""

    text: str
    tokens: tuple[str, ...]
    score: float
    alignment: Alignment | None = None


@dataclass(frozen=True)
class Translation:
    """A source line and its hypotheses, best first (one unless an n-best list was asked for).
    An empty line has one empty hypothesis."""

    source: str
    hypotheses: tuple[Hypothesis, ...]

    @property
    def best(self) -> Hypothesis:
        return self.hypotheses[0]

    @property
    def text(self) -> str:
        return self.hypotheses[0].text


@dataclass(frozen=True)
class Score:
    """The model's log-probability of ``target`` given ``source``, in the training tokenization
    (target pieces, then EOS) and without label smoothing: ``log_prob`` sums the ``tokens``
    log-probabilities (EOS included); ``per_token`` lists each piece ("</s>" last) with its own."""

    source: str
    target: str
    log_prob: float
    tokens: int
    per_token: tuple[tuple[str, float], ...] | None = None

    @classmethod
    def of(
        cls, source: str, target: str, pieces: Sequence[str], log_probs: Sequence[float], per_token: bool
    ) -> Score:
        """The pair's score from each target piece's log-probability, EOS last in both."""
        pairs = tuple(zip(pieces, log_probs, strict=True)) if per_token else None
        return cls(source, target, sum(log_probs), len(log_probs), pairs)

    @property
    def mean_log_prob(self) -> float:
        """Per-token log-probability: ``log_prob / tokens``."""
        return self.log_prob / self.tokens

    @property
    def nll(self) -> float:
        """Mean negative log-likelihood per token (the cross-entropy training reports as val loss)."""
        return -self.mean_log_prob
