"""Terms told to the model inline (train-by-append, Dinu et al. 2019): a source term found by a
glossary is followed by the target term it must become, between marker symbols,

    "Ein <term> Hund <to> hound </term> läuft."

A model trained on sources annotated so (``data.terms``: a bilingual dictionary, and the share
of its matches to annotate) learns to write the target term there, in its right form and place,
at full decoding speed; at translation time the user's glossary annotates the sources the same
way (``mt translate --glossary``). The source tokenizer holds the markers as symbols, so each is
one piece, and a CTranslate2 export or an Argos package translates annotated text unchanged.

In training a match is annotated only where one of its target terms is in the reference (as a
word, or with an English ending: "dogs" holds "dog"), with that term: a model must not learn to
write a term the reference does not have.
"""

from __future__ import annotations

import random

from mt_cli.text.glossary import WORD, Glossary, Match, lemma_candidates

TERM, TO, END = "<term>", "<to>", "</term>"
MARKERS = (TERM, TO, END)  # what the source tokenizer of a run with terms holds


def annotated(sentence: str, matches: list[tuple[Match, str]], hidden: frozenset[int] = frozenset()) -> str:
    """``sentence`` with each match (left to right, not overlapping) followed by its target term;
    the matches numbered in ``hidden`` lose their source words (training only)."""
    out, last = [], 0
    for number, (match, target) in enumerate(matches):
        term = "" if number in hidden else f" {sentence[match.start : match.end]}"
        out.append(f"{sentence[last : match.start]}{TERM}{term} {TO} {target} {END}")
        last = match.end
    out.append(sentence[last:])
    return "".join(out)


def with_glossary(sentence: str, glossary: Glossary) -> str:
    """``sentence`` with every term of the user's ``glossary`` in it annotated with its target."""
    return annotated(sentence, [(match, match.target) for match in glossary.find(sentence)])


def for_training(
    source: str, target: str, dictionary: Glossary, share: float, rng: random.Random, hidden: float = 0.0
) -> str:
    """``source`` with ``share`` of its dictionary terms whose target the reference ``target``
    holds annotated with that target, ``hidden`` of those without their source words (``rng``
    draws which)."""
    matches = dictionary.find(source)
    if not matches:
        return source
    forms = {form for word in WORD.findall(target) for form in lemma_candidates(word, dictionary.tgt_lang)}
    chosen = []
    for match in matches:
        held = next((term for term in match.targets if _holds(forms, term, dictionary.tgt_lang)), None)
        if held is not None and rng.random() < share:
            chosen.append((match, held))
    hide = frozenset(number for number in range(len(chosen)) if hidden > 0 and rng.random() < hidden)
    return annotated(source, chosen, hide)


def _holds(forms: set[str], term: str, lang: str) -> bool:
    """Whether every word of ``term`` is among the reference's word ``forms``."""
    words = WORD.findall(term)
    return bool(words) and all(not forms.isdisjoint(lemma_candidates(word, lang)) for word in words)
