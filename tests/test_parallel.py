"""Batches decoded side by side (decode.parallel): the same translations as one after another."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from mt_cli.decode import parallel
from mt_cli.decode import translator as translator_module
from mt_cli.decode.results import TranslateOptions
from mt_cli.decode.translator import Translator
from mt_cli.files import read_lines
from mt_cli.resources import SHIPPED_MULTI30K

CPU = torch.device("cpu")


def test_results_come_back_in_order_from_one_thread_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    threads_of = torch.get_num_threads
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)  # as on a 2-core CPU
    threads_inside: list[int] = []

    def decode(group: list[int]) -> list[int]:
        threads_inside.append(threads_of())  # the worker's own count
        return [2 * x for x in group]

    before = threads_of()
    groups = [[1, 2], [3], [4, 5, 6], [7]]
    assert parallel.side_by_side(decode, groups, CPU) == [[2, 4], [6], [8, 10, 12], [14]]
    assert threads_inside == [1, 1, 1, 1]
    assert threads_of() == before  # the caller's threads are its own


def test_one_group_or_one_thread_runs_in_the_callers_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    seen: list[str] = []

    def decode(group: int) -> int:
        seen.append(threading.current_thread().name)
        return group

    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert parallel.side_by_side(decode, [5], CPU) == [5]
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert parallel.side_by_side(decode, [1, 2, 3], CPU) == [1, 2, 3]
    assert seen == [threading.current_thread().name] * 4


@pytest.mark.parametrize("beam", [1, 5])
def test_side_by_side_translates_as_one_after_another(
    fp32: Translator, beam: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small batches, so that 200 lines make many groups to spread over the threads.
    card = dataclasses.replace(fp32.card, decode=dataclasses.replace(fp32.card.decode, max_tokens=300))
    translator = dataclasses.replace(fp32, card=card)
    lines = read_lines(SHIPPED_MULTI30K / "val.de.gz")[:200]
    options = TranslateOptions(beam=beam)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    together = translator.translate(lines, options)
    groups: list[int] = []
    monkeypatch.setattr(
        translator_module,
        "side_by_side",
        lambda decode, g, device: groups.append(len(g)) or [decode(x) for x in g],
    )
    alone = translator.translate(lines, options)
    assert groups[0] > 4
    assert [t.hypotheses[0].text for t in together] == [t.hypotheses[0].text for t in alone]
    for a, b in zip(together, alone):
        assert a.hypotheses[0].score == pytest.approx(b.hypotheses[0].score, abs=1e-5)
