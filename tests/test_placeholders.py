"""text/placeholders.py, and placeholders through an engine and a prepared corpus: every piece
comes back exactly once, whatever the model does with its symbol."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

from helpers import CONFIGS, FAST_TRAINING, quiet

from mt_cli.config.options import TranslateOptions
from mt_cli.config.recipe import load_config
from mt_cli.decode.engine import CardEngine
from mt_cli.decode.results import Hypothesis, Translation
from mt_cli.text.placeholders import SYMBOLS, Restored, mask, mask_pair, restore, sprinkle, symbol

SENTENCE = "Hallo {{user.name}}, du hast %1$s neue Nachrichten: <x/> https://example.com/a?b=1."


def test_each_kind_of_piece_is_masked_in_order() -> None:
    text = "{0} und {name}, %s und %d, %.2f und %(count)d, <b>fett</b>, www.mt.de/x, an a.b@example.org"
    masked = mask(text)
    assert masked.pieces == (
        "{0}", "{name}", "%s", "%d", "%.2f", "%(count)d", "<b>", "</b>", "www.mt.de/x", "a.b@example.org",
    )  # fmt: skip
    assert masked.text == (
        "<ph1> und <ph2>, <ph3> und <ph4>, <ph5> und <ph6>, <ph7>fett<ph8>, <ph9>, an <ph10>"
    )
    assert restore(masked.text, masked).text == text


def test_a_url_leaves_its_closing_stop_and_ordinary_percent_signs_stay_text() -> None:
    masked = mask(SENTENCE)
    assert masked.pieces == ("{{user.name}}", "%1$s", "<x/>", "https://example.com/a?b=1")
    assert masked.text.endswith("<ph4>.")
    assert mask("50 % Rabatt, 3 %-Punkte").pieces == ()


def test_pieces_past_the_last_symbol_stay_text() -> None:
    text = " ".join(f"{{{i}}}" for i in range(SYMBOLS + 2))
    masked = mask(text)
    assert len(masked.pieces) == SYMBOLS
    assert masked.text.endswith(f"{symbol(SYMBOLS)} {{{SYMBOLS}}} {{{SYMBOLS + 1}}}")


def test_restore_follows_the_order_the_model_chose() -> None:
    masked = mask(SENTENCE)
    restored = restore("<ph4> and <ph2> new messages for <ph1> <ph3>", masked)
    assert restored.text == "https://example.com/a?b=1 and %1$s new messages for {{user.name}} <x/>"
    assert restored.repairs == 0


def test_a_lost_symbol_comes_back_once_and_doubled_or_unknown_ones_go() -> None:
    masked = mask("Klicke <b>hier</b> oder {0}.")
    restored = restore("Click <ph1>here<ph1> or <ph7> now", masked)
    # Each lost one at its share of the translation's characters: </b> at 48%, {0} at 82%.
    assert restored.text == "Click <b>here </b> or {0} now"
    assert restored.repairs == 4  # one doubled, one unknown, two lost


def test_lost_pieces_keep_their_source_order_and_no_piece_is_cut_by_another() -> None:
    masked = mask('Ein Terrier läuft %2$s <g id="1"/> über grünes %1$s Gras.')
    assert restore("", masked).text == '%2$s <g id="1"/> %1$s'
    # The tag stays where the model put it; the two lost ones go to their shares, in source order.
    assert restore("A <ph2> terrier runs over green grass.", masked).text == (
        'A <g id="1"/> terrier %2$s runs over green %1$s grass.'
    )


def test_a_line_without_placeholders_is_left_as_it_is_but_for_stray_symbols() -> None:
    masked = mask("Ein Hund läuft.")
    assert masked.text == "Ein Hund läuft." and restore("A  dog runs.", masked).text == "A  dog runs."
    assert restore("A <ph1> dog runs.", masked) == Restored("A dog runs.", 1)


def test_sprinkle_puts_the_same_symbols_in_order_on_both_sides() -> None:
    rng = random.Random(3)
    for _ in range(50):
        src, tgt = sprinkle("Ein Hund läuft über die Wiese .", "A dog runs across the meadow .", rng)
        src_symbols, tgt_symbols = re.findall(r"<ph\d+>", src), re.findall(r"<ph\d+>", tgt)
        assert src_symbols == tgt_symbols == [symbol(i) for i in range(1, len(src_symbols) + 1)]
        assert 1 <= len(src_symbols) <= 3
        assert re.sub(r" ?<ph\d+>", "", src).strip() == "Ein Hund läuft über die Wiese ."


def test_a_training_pair_holding_pieces_on_both_sides_gets_them_masked_alike() -> None:
    source = "Öffne https://mt.example/a und {0}, dann {0}."
    target = "Open {0} and https://mt.example/a, then {0}."
    assert mask_pair(source, target) == (
        "Öffne <ph1> und <ph2>, dann <ph3>.",
        "Open <ph2> and <ph1>, then <ph3>.",
    )
    assert mask_pair(source, "Open it and {0}.") is None  # the reference lacks a piece
    assert mask_pair("Ein Hund.", "A dog.") is None


@dataclass
class _Scrambler(CardEngine):
    """An engine whose 'translation' is the source's words in reverse order, optionally losing
    the first symbol: the order and the losses a model may bring."""

    card: object = None
    src_tok: object = None
    tgt_tok: object = None
    lose_first: bool = False

    def resolve(self, options: TranslateOptions) -> TranslateOptions:
        return options

    def _translated(self, lines, options, warn, first_line):
        self.seen = list(lines)
        out = []
        for line in lines:
            words = line.split()[::-1]
            text = " ".join(words).replace(symbol(1), "", 1) if self.lose_first else " ".join(words)
            out.append(Translation(line, (Hypothesis(text, (), 0.0),)))
        return out


def test_an_engine_hides_the_pieces_and_puts_each_back_once() -> None:
    engine, warnings = _Scrambler(), []
    [translation] = engine.translate([SENTENCE], TranslateOptions(placeholders=True), warnings.append)
    assert "{{" not in engine.seen[0] and "<ph1>" in engine.seen[0]  # the model saw symbols only
    assert translation.source == SENTENCE
    for piece in mask(SENTENCE).pieces:
        assert translation.text.count(piece) == 1
    assert warnings == []
    lossy, warnings = _Scrambler(lose_first=True), []
    [translation] = lossy.translate(
        [SENTENCE, "Ohne."], TranslateOptions(placeholders=True), warnings.append
    )[:1]
    assert translation.text.count("{{user.name}}") == 1
    assert warnings == [
        "line 1: 1 placeholder symbols of the translation lost, doubled or unknown; each of the line's 4 "
        "placeholders is put back once"
    ]
    plain = _Scrambler()
    plain.translate([SENTENCE], TranslateOptions(placeholders=False), warnings.append)
    assert plain.seen == [SENTENCE]


def test_a_run_with_placeholders_holds_their_symbols_and_sprinkles_its_training_pairs(tmp_path: Path) -> None:
    from mt_cli.data.prepare import prepare_corpus, tokenizer_sample
    from mt_cli.text.tokenizer import prepare_tokenizers

    cfg = load_config(
        CONFIGS / "tiny.yaml", [*FAST_TRAINING, "data.train_limit=400", "data.placeholders=0.5"]
    )
    src_tok, tgt_tok = prepare_tokenizers(cfg, tmp_path, *tokenizer_sample(cfg), log=quiet)
    assert all(symbol(i) in src_tok.tags for i in range(1, SYMBOLS + 1))
    assert [tgt_tok.piece_id(symbol(i)) for i in (1, SYMBOLS)] == [
        tgt_tok.tags[symbol(1)],
        tgt_tok.tags[symbol(SYMBOLS)],
    ]
    corpus = prepare_corpus(cfg, tmp_path, src_tok, tgt_tok, quiet)
    with_symbols = 0
    for i in range(len(corpus)):
        src, tgt = corpus.text("src", i), corpus.text("tgt", i)
        assert re.findall(r"<ph\d+>", src) == re.findall(r"<ph\d+>", tgt)
        with_symbols += "<ph1>" in src
        if "<ph1>" in src:
            assert src_tok.tags[symbol(1)] in corpus.pieces("src", i)
    assert 0.4 < with_symbols / len(corpus) < 0.6
