"""decode/constrained.py: constrained beam search holds every constraint, searches as beam search
without any, reports a miss at the length limit; and --glossary-mode guarantee as typed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import VOCAB, random_model, random_sources

from mt_cli.data.batch import pad_sources
from mt_cli.decode.constrained import constrained_beam_search, holds
from mt_cli.decode.ensemble import Ensemble
from mt_cli.decode.search import beam_search
from mt_cli.specials import EOS_ID


def test_without_constraints_it_searches_exactly_as_beam_search() -> None:
    model = random_model(9)
    sources = random_sources(14, seed=12)
    src, src_mask = pad_sources(sources)
    plain = beam_search(model, src, src_mask, 4, 1.0, 1.5, 8, n_best=3)
    constrained = constrained_beam_search(
        model, src, src_mask, [[] for _ in sources], 4, 1.0, 1.5, 8, n_best=3
    )
    assert [[h.tokens for h in hyps] for hyps in constrained.found] == [
        [h.tokens for h in hyps] for hyps in plain
    ]
    assert constrained.missed == [False] * len(sources)


@pytest.mark.parametrize("beam", [1, 4])
def test_the_best_hypothesis_holds_its_sentence_constraints_and_misses_come_last(beam: int) -> None:
    model = random_model(3)
    sources = random_sources(12, seed=4)
    src, src_mask = pad_sources(sources)
    constraints = [[[5 + i % 7]] if i % 3 else [[9, 10, 11], [20 + i]] for i in range(len(sources))]
    result = constrained_beam_search(model, src, src_mask, constraints, beam, 1.0, 2.0, 10, n_best=beam)
    assert result.missed == [False] * len(sources)
    for hyps, terms in zip(result.found, constraints):
        held = [all(holds(hyp.tokens, term) for term in terms) for hyp in hyps]
        assert held[0] and held == sorted(held, reverse=True), (held, terms)


def test_a_constraint_longer_than_the_length_limit_is_a_reported_miss_not_a_hang() -> None:
    model = random_model(3)
    sources = random_sources(3, seed=4)
    src, src_mask = pad_sources(sources)
    too_long = [list(range(4, 34))]
    result = constrained_beam_search(model, src, src_mask, [[], too_long, [[7]]], 3, 1.0, 0.0, 6)
    assert result.missed == [False, True, False]
    assert all(len(hyps[0].tokens) <= 5 for hyps in result.found)  # the limit, EOS the 6th


def test_a_term_ends_a_word_no_piece_that_lengthens_it_follows() -> None:
    model = random_model(3)
    sources = random_sources(10, seed=6)
    src, src_mask = pad_sources(sources)
    constraints = [[[15]] for _ in sources]  # what this model writes first, again and again

    def after_the_term(continuations: tuple[int, ...]) -> list[int]:
        found = constrained_beam_search(model, src, src_mask, constraints, 4, 1.0, 2.0, 10, 1, continuations)
        return [(hyps[0].tokens + [EOS_ID])[hyps[0].tokens.index(15) + 1] for hyps in found.found]

    assert 15 in after_the_term(())
    assert 15 not in after_the_term((15, 30))  # were 15 a piece lengthening a word


def test_an_ensemble_is_constrained_as_one_model() -> None:
    model = random_model(5)
    sources = random_sources(6, seed=8)
    src, src_mask = pad_sources(sources)
    constraints = [[[30, 31]] for _ in sources]
    alone = constrained_beam_search(model, src, src_mask, constraints, 3, 1.0, 2.0, 10)
    twice = constrained_beam_search(Ensemble([model, model]), src, src_mask, constraints, 3, 1.0, 2.0, 10)
    assert [h[0].tokens for h in twice.found] == [h[0].tokens for h in alone.found]
    assert all(holds(h[0].tokens, [30, 31]) for h in twice.found)


def test_holds_finds_a_run_of_tokens() -> None:
    assert holds([1, 2, 3, 4], [2, 3]) and holds([1], []) and not holds([1, 3, 2], [2, 3])
    assert VOCAB >= 34  # the constraints above are ids of the random model's vocabulary


def test_mt_translate_guarantees_a_glossary_with_any_mt_model(trained_run: Path, tmp_path: Path) -> None:
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("Hund\thound\nMann\tgentleman\n", encoding="utf-8")
    command = [sys.executable, "-m", "mt_cli", "translate", "--run", str(trained_run), "--device", "cpu"]
    lines = "Ein Hund läuft.\nEin Mann mit einem Hund.\nZwei Kinder spielen.\n"
    done = subprocess.run(
        [*command, "--glossary", str(glossary), "--glossary-mode", "guarantee"],
        input=lines, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    first, second, third = done.stdout.splitlines()
    assert "hound" in first and "hound" in second and "gentleman" in second
    assert "hound" not in third and "gentleman" not in third
    refused = subprocess.run(
        [*command, "--engine", "ctranslate2", "--glossary", str(glossary), "--glossary-mode", "guarantee"],
        input=lines, capture_output=True, text=True,
    )  # fmt: skip
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip() == (
        "error: --glossary-mode guarantee needs mt's engine (--engine mt): constrained beam search is mt's"
    )
