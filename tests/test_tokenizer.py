from __future__ import annotations

import io
import itertools
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece as spm

from mt_cli.config.sections import Config, DataConfig, TokenizerConfig
from mt_cli.errors import CheckpointError
from mt_cli.text.tokenizer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    Tokenizer,
    load_tokenizers,
    prepare_tokenizers,
    tokenizer_path,
    tokenizer_stats,
    tokenizers_match,
    train_tokenizer,
)

# A synthetic corpus, so these tests run without the Multi30k copy.
_SUBJECTS = ["Ein Hund", "Eine Frau", "Zwei Kinder", "Der Mann", "Eine Gruppe von Leuten"]
_VERBS = ["läuft", "spielt", "sitzt", "steht", "wartet"]
_PLACES = ["im Park.", "am Strand.", "auf der Straße.", "vor einem Gebäude.", "neben dem Wasser."]
TEXTS = [" ".join(words) for words in itertools.product(_SUBJECTS, _VERBS, _PLACES)]
EN_TEXTS = [t.replace("Ein", "A").replace("im", "in the") for t in TEXTS]
VOCAB = 80


def _cfg(vocab: int = VOCAB, **tok: object) -> Config:
    return Config(
        data=DataConfig(src_lang="de", tgt_lang="en"),
        tokenizer=TokenizerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, **tok),
    )


@pytest.fixture
def tiny(tmp_path: Path) -> Tokenizer:
    return train_tokenizer(TEXTS, "de", VOCAB, TokenizerConfig(), tmp_path)


def test_special_ids_and_no_bos_eos_in_encode(tiny: Tokenizer) -> None:
    sp = tiny.sp
    assert (
        (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id())
        == (PAD_ID, UNK_ID, BOS_ID, EOS_ID)
        == (0, 1, 2, 3)
    )
    assert [sp.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert tiny.vocab_size == VOCAB
    (ids,) = tiny.encode(["Ein Hund läuft im Park."])
    assert ids and not set(ids) & {PAD_ID, UNK_ID, BOS_ID, EOS_ID}


def test_decode_stops_at_eos_and_ignores_pad_bos(tiny: Tokenizer) -> None:
    (ids,) = tiny.encode(["Ein Hund läuft."])
    other = tiny.encode(["Der Mann"])[0]
    assert (
        tiny.decode([[BOS_ID, *ids, EOS_ID, *other, PAD_ID], [*ids, PAD_ID, PAD_ID]])
        == ["Ein Hund läuft."] * 2
    )
    assert tiny.decode([[EOS_ID, *ids], []]) == ["", ""]


def test_bpe_dropout_is_seeded_and_keeps_the_text(tiny: Tokenizer) -> None:
    sampled = tiny.encode_with_dropout(TEXTS, 0.3, seed=7)
    assert sampled == tiny.encode_with_dropout(TEXTS, 0.3, seed=7)
    assert sampled != tiny.encode_with_dropout(TEXTS, 0.3, seed=8)
    assert tiny.decode(sampled) == TEXTS  # a different segmentation of the same text
    assert sum(map(len, sampled)) > 1.1 * sum(map(len, tiny.encode(TEXTS)))  # skipped merges: more pieces
    assert not any(UNK_ID in ids for ids in sampled)
    assert tiny.encode_with_dropout(TEXTS, 0.0, seed=7) == tiny.encode(TEXTS)


def test_unknown_characters_map_to_unk(tiny: Tokenizer) -> None:
    (ids,) = tiny.encode(["Ein Hund 🐕 läuft ж."])
    assert ids.count(UNK_ID) >= 2
    assert "⁇" in tiny.decode([ids])[0]
    assert tokenizer_stats(tiny, ["🐕"])["coverage"] < 1.0


def test_pieces_are_surface_strings(tiny: Tokenizer) -> None:
    pieces = tiny.pieces("Ein Hund läuft.")
    assert "".join(pieces).replace("▁", " ").strip() == "Ein Hund läuft."
    assert len(pieces) == len(tiny.encode(["Ein Hund läuft."])[0])


def test_pieces_and_ids_are_sentencepiece_s_answers(tiny: Tokenizer, tagged: Tokenizer) -> None:
    for tok in (tiny, tagged):
        sp = tok.sp
        assert tok.vocabulary() == [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
        assert len(tok.vocabulary()) == tok.vocab_size == sp.get_piece_size()
        (ids,) = tok.encode(["Ein Hund läuft im Park."])
        ids = [BOS_ID, *ids, EOS_ID, PAD_ID, UNK_ID]
        pieces = tok.to_pieces(ids)
        assert pieces == [sp.id_to_piece(i) for i in ids]
        assert pieces[0] == "<s>" and pieces[-3:] == ["</s>", "<pad>", "<unk>"]  # specials too, none dropped
        assert tok.to_pieces(tuple(ids)) == tok.to_pieces(iter(ids)) == pieces  # any sequence of ids
        assert tok.to_ids(pieces) == [sp.piece_to_id(p) for p in pieces] == ids
        assert [tok.piece_id(p) for p in pieces] == ids
        assert tok.to_pieces([]) == [] and tok.to_ids([]) == []
        assert tok.piece_id("no such piece") == sp.piece_to_id("no such piece") == UNK_ID
        assert tok.to_ids(["no such piece"]) == [UNK_ID]
    assert tagged.piece_id("<bt>") == tagged.tags["<bt>"] == tagged.sp.piece_to_id("<bt>")


def test_the_fingerprint_is_the_model_s_bytes(tiny: Tokenizer, tmp_path: Path) -> None:
    import hashlib

    assert (
        tiny.model_bytes() == tiny.sp.serialized_model_proto() == tokenizer_path(tmp_path, "de").read_bytes()
    )
    assert tiny.fingerprint() == hashlib.sha256(tiny.model_bytes()).hexdigest()
    again = train_tokenizer(TEXTS, "de", VOCAB, TokenizerConfig(), tmp_path / "again")
    other = train_tokenizer(TEXTS, "de", VOCAB - 10, TokenizerConfig(), tmp_path / "other")
    assert again.fingerprint() == tiny.fingerprint() != other.fingerprint()


def test_no_module_outside_text_touches_the_sentencepiece_object() -> None:
    import re

    package = Path(__file__).resolve().parents[1] / "mt_cli"
    touching = [
        f"{path.relative_to(package)}:{number}"
        for path in sorted(package.rglob("*.py"))
        if path.parent.name != "text"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\.sp\b", line)
    ]
    assert touching == [], "ask the Tokenizer (text/pieces.py) instead"


def test_training_is_deterministic_and_atomic(tmp_path: Path) -> None:
    a = train_tokenizer(TEXTS, "de", VOCAB, TokenizerConfig(), tmp_path / "a")
    b = train_tokenizer(TEXTS, "de", VOCAB, TokenizerConfig(), tmp_path / "b")
    assert (
        tokenizer_path(tmp_path / "a", "de").read_bytes() == tokenizer_path(tmp_path / "b", "de").read_bytes()
    )
    assert a.encode(TEXTS) == b.encode(TEXTS)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["spm.de.json", "spm.de.model"]


def test_tokenizers_trained_on_a_known_corpus_are_reused_without_reading_it(tmp_path: Path) -> None:
    corpus = {"files": [["/data/train.de", 100, 1], ["/data/train.en", 90, 1]], "train_limit": None}
    assert not tokenizers_match(_cfg(), tmp_path, corpus)
    prepare_tokenizers(_cfg(), tmp_path, TEXTS, EN_TEXTS, log=lambda message: None, corpus=corpus)
    assert tokenizers_match(_cfg(), tmp_path, corpus)
    assert not tokenizers_match(_cfg(vocab=60), tmp_path, corpus)
    assert not tokenizers_match(_cfg(sample_sentences=10), tmp_path, corpus)
    assert not tokenizers_match(_cfg(), tmp_path, {**corpus, "train_limit": 10})
    tokenizer_path(tmp_path, "en").unlink()
    assert not tokenizers_match(_cfg(), tmp_path, corpus)


def test_small_corpus_gets_smaller_vocab_instead_of_failing(tmp_path: Path) -> None:
    tok = train_tokenizer(TEXTS[:5], "de", 5000, TokenizerConfig(), tmp_path)
    assert 4 < tok.vocab_size < 5000


def test_prepare_reuses_then_retrains_when_config_or_text_changes(tmp_path: Path) -> None:
    logs: list[str] = []
    src, tgt = prepare_tokenizers(_cfg(), tmp_path, TEXTS, EN_TEXTS, log=logs.append)
    assert (src.lang, tgt.lang) == ("de", "en")
    assert all("training" in line for line in logs) and len(logs) == 2
    model = tokenizer_path(tmp_path, "de")
    before = model.stat().st_mtime_ns

    logs.clear()
    again, _ = prepare_tokenizers(_cfg(), tmp_path, TEXTS, EN_TEXTS, log=logs.append)
    assert all("reusing" in line for line in logs) and len(logs) == 2
    assert model.stat().st_mtime_ns == before
    assert again.encode(TEXTS) == src.encode(TEXTS)

    logs.clear()
    smaller, _ = prepare_tokenizers(_cfg(vocab=60), tmp_path, TEXTS, EN_TEXTS, log=logs.append)
    assert smaller.vocab_size == 60
    assert any("training" in line and "vocab_size 80 -> 60" in line for line in logs)

    logs.clear()
    prepare_tokenizers(_cfg(vocab=60, model_type="unigram"), tmp_path, TEXTS, EN_TEXTS, log=logs.append)
    assert any("model_type bpe -> unigram" in line for line in logs)

    logs.clear()
    prepare_tokenizers(_cfg(vocab=60, model_type="unigram"), tmp_path, TEXTS[:-5], EN_TEXTS, log=logs.append)
    assert "training text changed" in logs[0] and "tokenizer en: reusing" in logs[-1]


def test_prepare_retrains_when_settings_record_is_missing(tmp_path: Path) -> None:
    prepare_tokenizers(_cfg(), tmp_path, TEXTS, EN_TEXTS, log=lambda _: None)
    (tmp_path / "spm.en.json").unlink()
    logs: list[str] = []
    prepare_tokenizers(_cfg(), tmp_path, TEXTS, EN_TEXTS, log=logs.append)
    assert "reusing" in logs[0] and "spm.en.json" in logs[1]


def test_load_tokenizers_missing_and_corrupt(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"spm\.de\.model.*mt (prepare|train)"):
        load_tokenizers(tmp_path, "de", "en")
    train_tokenizer(TEXTS, "de", VOCAB, TokenizerConfig(), tmp_path)
    with pytest.raises(CheckpointError, match=r"spm\.en\.model"):
        load_tokenizers(tmp_path, "de", "en")
    tokenizer_path(tmp_path, "en").write_bytes(b"not a model")
    with pytest.raises(CheckpointError, match="corrupt") as err:
        load_tokenizers(tmp_path, "de", "en")
    assert "\n" not in str(err.value)
    src, _ = load_tokenizers(tmp_path, "de", "de")
    assert src.vocab_size == VOCAB


def test_stats(tiny: Tokenizer) -> None:
    stats = tokenizer_stats(tiny, TEXTS)
    assert stats["vocab_size"] == VOCAB and stats["sentences"] == len(TEXTS)
    assert stats["coverage"] == 1.0 and stats["unk"] == 0
    assert stats["pieces_per_sentence"] == pytest.approx(sum(map(len, tiny.encode(TEXTS))) / len(TEXTS))


def test_round_trip_on_multi30k(small_tokenizers: tuple[Tokenizer, Tokenizer], data_dir: Path) -> None:
    from mt_cli.data.corpus import load_corpus

    val = load_corpus(DataConfig(dir=str(data_dir)), ["val"])["val"]
    for tok, column in zip(small_tokenizers, ("src", "tgt"), strict=True):
        lines = val[column][:300]
        # SentencePiece normalises runs of spaces, so only whitespace-normal lines round-trip exactly.
        lines = [x for x in lines if x == " ".join(x.split())]
        assert len(lines) > 250
        ids = tok.encode(lines)
        assert sum(i.count(UNK_ID) for i in ids) < 5
        assert tok.decode(ids) == lines


def test_import_is_light() -> None:
    code = "import sys, mt_cli.text.tokenizer; assert not {'datasets', 'torch'} & set(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_joint_vocabulary_is_one_model_for_both_languages(tmp_path: Path) -> None:
    logs: list[str] = []
    corpus = {"files": [], "train_limit": None}
    src, tgt = prepare_tokenizers(_cfg(joint=True), tmp_path, TEXTS, EN_TEXTS, log=logs.append, corpus=corpus)
    assert tokenizer_path(tmp_path, "de").read_bytes() == tokenizer_path(tmp_path, "en").read_bytes()
    mixed = [TEXTS[0], EN_TEXTS[-1]]
    assert src.encode(mixed) == tgt.encode(mixed) and src.vocab_size == tgt.vocab_size
    # It learnt from both sides: English words are as short in pieces as German ones.
    separate, _ = prepare_tokenizers(_cfg(), tmp_path / "separate", TEXTS, EN_TEXTS, log=logs.append)
    english = sum(map(len, src.encode(EN_TEXTS)))
    assert english < sum(map(len, separate.encode(EN_TEXTS)))
    assert tokenizers_match(_cfg(joint=True), tmp_path, corpus)
    assert not tokenizers_match(_cfg(), tmp_path, corpus)
    logs.clear()
    prepare_tokenizers(_cfg(joint=True), tmp_path, TEXTS, EN_TEXTS, log=logs.append, corpus=corpus)
    assert all("reusing" in line for line in logs) and len(logs) == 2


TAGS = ["<2en>", "<2de>", "<bt>"]


@pytest.fixture
def tagged(tmp_path: Path) -> Tokenizer:
    return train_tokenizer(TEXTS, "de", VOCAB, TokenizerConfig(), tmp_path, tags=TAGS)


def test_a_tagged_source_never_has_its_tag_split(tagged: Tokenizer, tiny: Tokenizer) -> None:
    assert tagged.tags == {"<2en>": 4, "<2de>": 5, "<bt>": 6} and tiny.tags == {}
    text = "Ein Hund läuft im Park."
    [plain] = tagged.encode([text])
    # Each leading tag is its own id, with no "▁" piece before it (SentencePiece alone puts one).
    assert tagged.encode([f"<2en> {text}", f"<2de> <bt> {text}"]) == [[4, *plain], [5, 6, *plain]]
    for seed in range(5):  # BPE-dropout splits the words, never the tags
        ids = tagged.encode_with_dropout([f"<2en> <bt> {text}"], 0.5, seed)[0]
        assert ids[:2] == [4, 6] and all(i > 6 for i in ids[2:])
    # A tag inside a sentence is still one piece (a user-defined symbol); an unknown one is text.
    assert tagged.to_pieces(tagged.encode([f"Ein <bt> {text}"])[0]).count("<bt>") == 1
    assert 4 not in tagged.encode(["<2fr> Ein Hund"])[0]
    assert tagged.decode([[4, *plain]]) == [f"<2en> {text}"]  # the text round-trips


def test_tags_are_part_of_what_a_tokenizer_is_reused_for(tmp_path: Path) -> None:
    from mt_cli.config.sections import CorpusConfig

    untagged = _cfg()
    corpora = [CorpusConfig(source="multi30k"), CorpusConfig(source="multi30k", tag="<bt>")]
    tagged_cfg = Config(data=DataConfig(corpora=corpora), tokenizer=untagged.tokenizer)
    corpus = {"files": [], "train_limit": None}
    prepare_tokenizers(untagged, tmp_path, TEXTS, EN_TEXTS, log=lambda _: None, corpus=corpus)
    assert tokenizers_match(untagged, tmp_path, corpus) and not tokenizers_match(tagged_cfg, tmp_path, corpus)
    logs: list[str] = []
    src, tgt = prepare_tokenizers(tagged_cfg, tmp_path, TEXTS, EN_TEXTS, log=logs.append, corpus=corpus)
    assert src.tags == {"<bt>": 4} and tgt.tags == {}  # tags are the source side's
    assert "tags unset -> ['<bt>']" in logs[0] and "tokenizer en: reusing" in logs[1]


def test_a_tag_that_the_tokenizer_does_not_hold_whole_is_one_error(tmp_path: Path, tagged: Tokenizer) -> None:
    from mt_cli.errors import DataError
    from mt_cli.text.tags import check_tags

    check_tags(tagged, TAGS)
    # A tokenizer made elsewhere, without the tag, on text that holds it (and without SentencePiece's
    # split between letters and punctuation, which mt's tokenizers keep): "▁<bt>" is an ordinary piece.
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([f"<bt> {line}" for line in TEXTS] * 20),
        model_writer=model,
        vocab_size=150,
        model_type="bpe",
        hard_vocab_limit=False,
        split_by_unicode_script=False,
        **{"pad_id": PAD_ID, "unk_id": UNK_ID, "bos_id": BOS_ID, "eos_id": EOS_ID, "minloglevel": 2},
    )
    ordinary = Tokenizer(spm.SentencePieceProcessor(model_proto=model.getvalue()), "de")
    assert ordinary.pieces("<bt> Ein Hund")[0] == "▁<bt>" and ordinary.tags == {}
    with pytest.raises(DataError, match="tag <bt> collides with a piece of the de vocabulary") as err:
        check_tags(ordinary, ["<bt>"])
    assert "\n" not in str(err.value)
    plain = train_tokenizer(TEXTS, "de", VOCAB, TokenizerConfig(), tmp_path / "plain")
    with pytest.raises(DataError, match="the de tokenizer has no tag <2en>"):
        check_tags(plain, ["<2en>"])


def test_word_continuations_are_the_pieces_that_lengthen_a_word(tiny: Tokenizer) -> None:
    pieces = tiny.vocabulary()
    continuations = set(tiny.word_continuations)
    assert continuations and all(pieces[i][0].isalnum() for i in continuations)
    starts = [i for i, piece in enumerate(pieces) if piece.startswith("▁")]
    assert starts and not continuations & set(starts)
    assert not continuations & {0, 1, 2, 3}  # the specials
