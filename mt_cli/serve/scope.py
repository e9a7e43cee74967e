"""``Scope``: what this server translates (the engine's directions, the default first) and what one
request may send (characters, sentences, alternatives): the limits every route checks against."""

from __future__ import annotations

from dataclasses import dataclass

from mt_cli.config.card import describe_directions


@dataclass(frozen=True)
class Scope:
    """The language scope the engine translates by default (its first direction), every direction
    it knows, and what a request may send."""

    source: str
    target: str
    max_chars: int  # characters of all of a request's texts together
    max_lines: int  # lines of one request: its share of the queue, so it cannot starve the others
    max_alternatives: int = 0  # alternatives one text may ask for (--alternatives-limit)
    more: tuple[tuple[str, str], ...] = ()  # further directions of a multilingual model

    @property
    def directions(self) -> tuple[tuple[str, str], ...]:
        """Every (source, target) the engine knows, the default first."""
        return tuple(dict.fromkeys([(self.source, self.target), *self.more]))

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(src for src, _ in self.directions))

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(tgt for _, tgt in self.directions))

    def describe(self) -> str:
        """``"de -> en, fr -> en"``, as messages name the directions."""
        return describe_directions(self.directions)
