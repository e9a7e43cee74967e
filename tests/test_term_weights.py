"""data/term_weights.py: the target pieces of an annotated term weigh more in the training loss."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from helpers import CONFIGS, FAST_TRAINING, quiet

from mt_cli.config.recipe import load_config
from mt_cli.config.sections import Config
from mt_cli.data.batch import Batch, collate
from mt_cli.data.term_weights import TermWeights
from mt_cli.disk.layout import RunDir
from mt_cli.errors import ConfigError
from mt_cli.text.pieces import Tokenizer
from mt_cli.text.terms import END, TERM, TO

WEIGHTS = TermWeights(to_id=90, end_id=91, space_id=4, weight=3.0)
TERM_ID = 89  # "<term>"


def test_the_pieces_between_to_and_end_weigh_more_where_the_target_has_them() -> None:
    sources = [
        [5, TERM_ID, 6, 90, 40, 41, 4, 91, 7, TERM_ID, 90, 50, 91, 3],  # two terms, the second hidden
        [5, TERM_ID, 6, 90, 60, 91, 3],  # a term the target does not have
        [5, 6, 3],  # no annotation
    ]
    targets = [
        [2, 50, 8, 40, 41, 42, 9, 40, 41, 3],  # "40 41" twice, the first inflected ("42" follows)
        [2, 61, 3],
        [2, 40, 41, 3],  # the same pieces, but its source announces nothing
    ]
    batch = WEIGHTS(collate(sources, targets))
    expected = torch.ones(batch.tgt_out.shape)
    expected[0, [0, 2, 3, 6, 7]] = 3.0  # tgt_out drops BOS: "50" at 0, "40 41" at 2-3 and 6-7
    assert torch.equal(batch.tgt_weight, expected)


def test_the_weights_follow_padding_and_the_device() -> None:
    batch = WEIGHTS(collate([[90, 40, 91, 3]], [[2, 40, 3]]))
    padded = batch.padded(8).to("cpu")
    assert padded.tgt_weight.shape == padded.tgt_out.shape == (1, 8)
    assert padded.tgt_weight[0].tolist() == [3.0, 1, 1, 1, 1, 1, 1, 1]


def terms_recipe(directory: Path, *overrides: str) -> Config:
    """The tiny recipe with a four-term dictionary, one joint vocabulary and ``overrides``."""
    dictionary = directory / "dictionary.tsv"
    dictionary.write_text("Mann\tman\nHund\tdog\nFrau\twoman\nStraße\tstreet\n", encoding="utf-8")
    terms = [f"data.terms={dictionary}", "data.terms_share=1.0", "tokenizer.joint=true"]
    vocabulary = ["tokenizer.src_vocab_size=600", "tokenizer.tgt_vocab_size=600"]
    return load_config(CONFIGS / "tiny.yaml", [*FAST_TRAINING, *terms, *vocabulary, *overrides])


def test_a_joint_tokenizer_cuts_a_term_into_the_same_pieces_on_both_sides(tmp_path: Path) -> None:
    from mt_cli.data.prepare import prepare_corpus, tokenizer_sample
    from mt_cli.text.tokenizer import prepare_tokenizers

    cfg = terms_recipe(tmp_path, "data.train_limit=400")
    src_tok, tgt_tok = prepare_tokenizers(cfg, tmp_path, *tokenizer_sample(cfg), log=quiet)
    corpus = prepare_corpus(cfg, tmp_path, src_tok, tgt_tok, quiet)
    batch = TermWeights.of(src_tok, 2.0)(corpus.collate(list(range(len(corpus)))))
    announced = sum(len(re.findall(rf"{TO} \w+ {END}", corpus.text("src", i))) for i in range(len(corpus)))
    weighted = tgt_tok.decode([ids[w == 2.0].tolist() for ids, w in zip(batch.tgt_out, batch.tgt_weight)])
    found = [word for line in weighted for word in line.split()]
    assert announced > 100 and set(found) <= {"man", "dog", "woman", "street"}
    # The reference holds every annotated term (text.terms); a sentence's first word is capitalised
    # ("Man") and so other pieces: those few go unweighted.
    assert len(found) >= 0.8 * announced


def test_training_weighs_the_terms_of_every_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mt_cli.train.run import train

    weighted: list[int] = []  # per batch, its target positions of weight 3
    weigh = TermWeights.__call__

    def counted(self: TermWeights, batch: Batch) -> Batch:
        batch = weigh(self, batch)
        weighted.append(int((batch.tgt_weight == 3.0).sum()))
        return batch

    monkeypatch.setattr(TermWeights, "__call__", counted)
    cfg = terms_recipe(
        tmp_path, "train.term_loss_weight=3", "train.max_steps=4", f"run_dir={tmp_path / 'run'}"
    )
    train(cfg, tmp_path / "run", resume=False, log=lambda message: None)
    assert len(weighted) == 4 and all(count > 0 for count in weighted)


def test_token_dropout_never_touches_an_annotation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mt_cli.model.dropout import TokenDropout, within_spans
    from mt_cli.train.run import train

    seen: list[tuple[torch.Tensor, torch.Tensor, tuple[int, int] | None]] = []  # (ids, dropped, spared)
    drop = TokenDropout.forward

    def recorded(self: TokenDropout, tokens: torch.Tensor) -> torch.Tensor:
        out = drop(self, tokens)
        if self.training and self.spared is not None:
            seen.append((tokens, out, self.spared))
        return out

    monkeypatch.setattr(TokenDropout, "forward", recorded)
    cfg = terms_recipe(
        tmp_path, "model.src_token_dropout=0.3", "train.max_steps=4", f"run_dir={tmp_path / 'run'}"
    )
    train(cfg, tmp_path / "run", resume=False, log=lambda message: None)
    assert len(seen) == 4  # the source side of each update; the target side spares nothing
    tokenizer = Tokenizer.load(RunDir(tmp_path / "run").tokenizer("de"), "de")
    assert seen[0][2] == tuple(tokenizer.to_ids([TERM, END]))
    for tokens, out, (open_id, close_id) in seen:
        annotation = within_spans(tokens, open_id, close_id)
        assert annotation.any() and torch.equal(out[annotation], tokens[annotation])
        dropped = (out != tokens) & (tokens >= 4)
        assert dropped.any()  # the rest of the source still loses words


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["train.term_loss_weight=0"], "train.term_loss_weight=0.0 must be over 0"),
        (["train.term_loss_weight=2"], "it needs data.terms"),
        (["train.term_loss_weight=2", "data.terms=x.tsv"], "it needs tokenizer.joint"),
    ],
)
def test_a_term_loss_weight_needs_terms_and_a_joint_tokenizer(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(CONFIGS / "tiny.yaml", overrides)
