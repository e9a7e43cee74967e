"""What prepare does to the training pairs as it reads them: mixSeq's joined pairs (the
placeholders' and terms' are tested with their modules, test_placeholders and test_terms)."""

from __future__ import annotations

from mt_cli.data.augment import CONCAT_REACH, with_concatenations


def test_concat_joins_each_pair_with_a_later_one_with_its_probability() -> None:
    pairs = [(f"q{i}.", f"a{i}.") for i in range(20_000)]
    out = list(with_concatenations(iter(pairs), 0.25, 0))
    assert out == list(with_concatenations(iter(pairs), 0.25, 0))  # the same every time
    assert [pair for pair in out if " " not in pair[0]] == pairs  # every pair, in order
    joined = [pair for pair in out if " " in pair[0]]
    assert 0.23 * len(pairs) < len(joined) < 0.26 * len(pairs)
    for src, tgt in joined:
        first, second = (int(word[1:-1]) for word in src.split())
        assert tgt == f"a{first}. a{second}." and 1 <= second - first <= CONCAT_REACH
    seconds = [int(src.split()[1][1:-1]) for src, _ in joined]
    middle = [n for n in seconds if CONCAT_REACH <= n < len(pairs) - CONCAT_REACH]
    assert 0.23 < len(middle) / (len(pairs) - 2 * CONCAT_REACH) < 0.27  # as often the second


def test_concat_never_joins_a_pair_with_an_empty_side() -> None:
    pairs = [("a.", "b."), ("", "x."), (None, "y."), ("c.", "d.")] * 500
    joined = [pair for pair in with_concatenations(iter(pairs), 1.0, 0) if " " in (pair[0] or "")]
    assert joined and all(src.count(".") == 2 and tgt.count(".") == 2 for src, tgt in joined)
