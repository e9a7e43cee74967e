"""source: backtranslation: text translated by another run into synthetic pairs, kept in a cache
with its provenance, reused, read like any corpus; forward translation the same way round.

One tiny en->de run per module (20 updates on 400 pairs) translates the shipped task 2 English
captions: it is the reverse model of a de->en run, and the forward model of an en->de one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import CONFIGS, quiet

import mt_cli
from mt_cli.api import load
from mt_cli.config.options import Sampling, TranslateOptions
from mt_cli.config.recipe import config_from_dict, load_config
from mt_cli.config.sections import Config
from mt_cli.data import synthetic
from mt_cli.data.corpus import train_pairs
from mt_cli.decode.translator import Translator
from mt_cli.disk.files import file_sha256
from mt_cli.disk.layout import RunDir
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.errors import ConfigError, DataError, InputError
from mt_cli.train import backtranslation
from mt_cli.train.run import prepare, train

CAPTIONS = SHIPPED_MULTI30K / "task2" / "train.2.en.gz"  # 29,000 English captions, not task 1's
SMALL = ["data.train_limit=300", "train.amp=off", "train.test_at_end=false", "train.val_bleu=false"]


@pytest.fixture(scope="module")
def reverse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny en->de run: the reverse model of the tiny de->en recipe."""
    run = tmp_path_factory.mktemp("reverse") / "en-de"
    overrides = [*SMALL, "data.train_limit=400", "data.src_lang=en", "data.tgt_lang=de"]
    overrides += ["train.max_steps=20", "train.validate_every_steps=20", "train.average_last=0"]
    train(load_config(CONFIGS / "tiny.yaml", overrides), run, resume=False, log=quiet)
    return run


def with_corpus(entry: dict, *overrides: str) -> Config:
    """The tiny recipe on the first 300 Multi30k pairs plus ``entry``."""
    corpora = [{"source": "multi30k"}, entry]
    return load_config(CONFIGS / "tiny.yaml", [*SMALL, f"data.corpora={json.dumps(corpora)}", *overrides])


def sampled(reverse: Path, cache: Path) -> dict:
    return {
        "source": "backtranslation",
        "run": str(reverse),
        "text": [str(CAPTIONS)],
        "train_limit": 300,
        "tag": "<bt>",
        "decode": {"sampling": {"top_k": 10, "seed": 3}},
        "cache_dir": str(cache),
    }


def made(cfg: Config) -> synthetic.Synthetic:
    return synthetic.resolve(cfg.data.entries()[1])


def manifests(run: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((run / "prepared").glob("*/manifest.json"))]


@pytest.fixture(scope="module")
def back_translated(reverse: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Config, Path]:
    """`mt prepare` of a de->en run with 300 back-translated captions: (its config, its run)."""
    root = tmp_path_factory.mktemp("bt")
    cfg = with_corpus(sampled(reverse, root / "cache"))
    prepare(cfg, root / "run", quiet)
    return cfg, root / "run"


def test_back_translated_sources_are_the_reverse_models_samples(
    reverse: Path, back_translated: tuple[Config, Path]
) -> None:
    cfg, _ = back_translated
    captions = read_lines(CAPTIONS)[:300]
    pairs = list(train_pairs(cfg.data.entries()[1]))
    assert [tgt for _, tgt in pairs] == captions  # the text is the target side, as given
    model = load(reverse, compute_type="float32")
    expected = model.translate(captions, sampling=Sampling(top_k=10, seed=3))
    assert [src for src, _ in pairs] == [t.text for t in expected]
    assert len({src for src, _ in pairs}) > 100  # translations, not one line repeated


def test_the_provenance_is_in_the_cache_and_the_manifest(
    reverse: Path, back_translated: tuple[Config, Path]
) -> None:
    cfg, run = back_translated
    best = RunDir(reverse).best
    provenance = made(cfg).provenance()
    assert provenance["run"] == str(reverse) and provenance["checkpoint"] == str(best)
    assert provenance["checkpoint_sha256"] == file_sha256(best)
    assert provenance["direction"] == "en->de"
    # The options as used: the run's length penalty filled in (it normalises a sample's score).
    alpha = load_config(CONFIGS / "tiny.yaml").decode.length_penalty
    sampling = Sampling(top_k=10, seed=3)
    used = TranslateOptions(beam=1, length_penalty=alpha, sampling=sampling, tgt_lang="de")
    assert provenance["decoding"] == used.record()
    assert provenance["text"] == [{"file": str(CAPTIONS), "sha256": file_sha256(CAPTIONS)}]
    assert provenance["lines"] == provenance["pairs"] == 300 and provenance["train_limit"] == 300
    assert provenance["engine"] == "mt" and provenance["ensemble"] == []
    assert provenance["mt_version"] == mt_cli.__version__ and provenance["time"].endswith("+00:00")
    [synthetic_manifest] = [m for m in manifests(run) if "origin" in m["recipe"]]
    assert synthetic_manifest["recipe"]["origin"] == provenance
    assert synthetic_manifest["read"] == 300 and synthetic_manifest["recipe"]["prefix"] == "<bt> "


def test_a_second_run_reuses_the_translations(
    back_translated: tuple[Config, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg, _ = back_translated
    provenance = made(cfg).directory / synthetic.PROVENANCE
    stamp = provenance.stat().st_mtime_ns

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("the cached translations were not reused")

    monkeypatch.setattr(backtranslation, "load_trained", no_model)
    heard: list[str] = []
    short = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, max_steps=2))
    train(short, tmp_path / "run", resume=False, log=heard.append)  # `mt train` this time
    assert any("reusing 300 synthetic pairs" in line for line in heard)
    assert provenance.stat().st_mtime_ns == stamp
    assert [p.name for p in made(cfg).directory.parent.iterdir()] == [made(cfg).directory.name]


def test_forward_translation_pairs_the_text_with_the_forward_models_translation(
    reverse: Path, tmp_path: Path
) -> None:
    entry = {
        "source": "backtranslation",
        "run": str(reverse),
        "text": [str(CAPTIONS)],
        "side": "source",
        "train_limit": 200,
        "beam_size": 1,  # the flat key of earlier versions: read as decode.beam
        "cache_dir": str(tmp_path / "cache"),
    }
    cfg = with_corpus(entry, "data.src_lang=en", "data.tgt_lang=de")
    heard: list[str] = []
    prepare(cfg, tmp_path / "run", heard.append)
    # No progress bar on a pipe: the log says how far the translation got.
    assert any(": 200 of 200 lines translated (" in line for line in heard), heard
    captions = read_lines(CAPTIONS)[:200]
    pairs = list(train_pairs(cfg.data.entries()[1]))
    assert [src for src, _ in pairs] == captions  # the text is the source side this time
    expected = load(reverse, compute_type="float32").translate(captions, beam=1)
    assert [tgt for _, tgt in pairs] == [t.text for t in expected]
    assert made(cfg).provenance()["decoding"]["beam"] == 1


def test_an_interrupted_translation_leaves_only_its_whole_chunks_and_goes_on_from_them(
    reverse: Path, back_translated: tuple[Config, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = with_corpus(sampled(reverse, tmp_path / "cache"))  # the fixture's entry, another cache
    calls = []
    translate = Translator.translate

    def interrupted(self: Translator, lines: list[str], *args: object, **kwargs: object) -> list:
        calls.append(len(lines))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return translate(self, lines, *args, **kwargs)

    monkeypatch.setattr(backtranslation, "CHUNK", 100)
    monkeypatch.setattr(Translator, "translate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare(cfg, tmp_path / "run", quiet)
    assert calls == [100, 100]  # streamed in chunks, not all at once
    assert os.listdir(tmp_path / "cache") == [f"{made(cfg).key}.partial"] and not (tmp_path / "run").exists()
    with pytest.raises(DataError, match="are not made yet"):
        list(train_pairs(cfg.data.entries()[1]))
    prepare(cfg, tmp_path / "run", quiet)
    assert calls == [100, 100, 100, 100]  # the first chunk was kept: two more to translate
    assert made(cfg).provenance()["lines"] == 300 and os.listdir(tmp_path / "cache") == [made(cfg).key]
    whole = made(back_translated[0]).directory  # a line's sample depends on the seed and the line only
    assert read_lines(made(cfg).directory / synthetic.TRANSLATION) == read_lines(
        whole / synthetic.TRANSLATION
    )


def test_text_that_is_not_utf8_is_one_error_and_leaves_no_cache(reverse: Path, tmp_path: Path) -> None:
    (tmp_path / "text.en").write_bytes(b"A dog runs.\nA cat \xff sleeps.\n")
    entry = {**sampled(reverse, tmp_path / "cache"), "text": [str(tmp_path / "text.en")]}
    with pytest.raises(InputError, match=r"^data.corpora\[1\].text: .*text.en is not UTF-8 \(line 2\)"):
        prepare(with_corpus(entry), tmp_path / "run", quiet)
    assert os.listdir(tmp_path / "cache") == [] and not (tmp_path / "run").exists()


def mt_prepare(corpus: dict, cwd: Path, *overrides: str) -> subprocess.CompletedProcess:
    corpora = json.dumps([{"source": "multi30k"}, corpus])
    args = ["prepare", "--config", "tiny", "--run", "new", "--set", f"data.corpora={corpora}"]
    args += [part for item in overrides for part in ("--set", item)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mt_cli", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


@pytest.mark.parametrize(
    ("entry", "overrides", "message"),
    [
        (
            {"text": [str(CAPTIONS)]},
            ["data.src_lang=en", "data.tgt_lang=de"],
            "data.corpora[1].run: {run} translates en->de, but back-translation of this corpus's de text "
            "(its target side) needs a run that translates de->en",
        ),
        (
            {"text": [str(CAPTIONS)], "side": "source"},
            [],
            "data.corpora[1].run: {run} translates en->de, but forward translation of this corpus's de "
            "text (its source side) needs a run that translates de->en",
        ),
        (
            {"text": [str(CAPTIONS)], "run": "missing"},
            [],
            "data.corpora[1].run: run directory missing does not exist",
        ),
        (
            {"text": [str(CAPTIONS)], "run": "{run}:nope"},
            [],
            "data.corpora[1].run: {run}/checkpoints/nope.pt does not exist (checkpoints in",
        ),
        ({"text": ["captions.en"]}, [], "data.corpora[1].text: captions.en does not exist"),
        ({"text": ["{run}"]}, [], "data.corpora[1].text: {run} is a directory, not a text file"),
    ],
)
def test_bad_backtranslation_corpora_are_one_line_and_leave_nothing(
    reverse: Path, tmp_path: Path, entry: dict, overrides: list[str], message: str
) -> None:
    corpus = {"source": "backtranslation", "run": str(reverse), **entry, "train_limit": 20}
    corpus = json.loads(json.dumps(corpus).replace("{run}", str(reverse)))
    before = sorted(p.relative_to(reverse) for p in reverse.rglob("*"))
    result = mt_prepare(corpus, tmp_path, *overrides)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert message.replace("{run}", str(reverse)) in result.stderr
    assert os.listdir(tmp_path) == []
    assert sorted(p.relative_to(reverse) for p in reverse.rglob("*")) == before


def corpus_config(entry: dict) -> Config:
    return config_from_dict({"data": {"corpora": [{"source": "multi30k"}, entry]}})


BT = {"source": "backtranslation", "run": "runs/en-de", "text": ["captions.en"]}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({**BT, "run": None}, r"data.corpora\[1\].source=backtranslation needs data.corpora\[1\].run"),
        ({**BT, "text": []}, r"needs data.corpora\[1\].text: \[file, ...\]"),
        ({**BT, "files": {"train": ["a", "b"]}}, r"data.corpora\[1\].files has no meaning for source=back"),
        ({**BT, "dir": "data"}, r"data.corpora\[1\].dir has no meaning for source=backtranslation"),
        ({"source": "multi30k", "run": "r"}, r"data.corpora\[1\].run is a key of source=backtranslation"),
        ({"source": "multi30k", "decode": {"beam": 4}}, r"\[1\].decode is a key of source=backtranslation"),
        ({**BT, "decode": {"beam": 0}}, r"^data.corpora\[1\].decode.beam: beam size 0 must be at least 1"),
        ({**BT, "decode": {"length_penalty": -1}}, r"^data.corpora\[1\].decode.length_penalty: length pe"),
        ({**BT, "decode": {"align": True}}, r"^data.corpora\[1\].decode.align has no meaning for a transl"),
        ({**BT, "decode": {"tgt_lang": "fr"}}, r"^data.corpora\[1\].decode.tgt_lang has no meaning"),
        (
            {**BT, "decode": {"beam": 5, "sampling": {}}},
            r"^data.corpora\[1\].decode.beam: sampling draws one translation per line and cannot search",
        ),
        ({**BT, "decode": {"sampling": {"top_k": 0}}}, r"^data.corpora\[1\].decode.sampling.top_k: top-k 0 "),
        (
            {**BT, "decode": {"sampling": {"top_p": 1.5}}},
            r"decode.sampling.top_p: top-p 1.5 must be in \(0, 1\]",
        ),
        ({**BT, "decode": {"sampling": {"temperature": -1}}}, r"temperature -1.0 must be a number >= 0"),
        ({**BT, "decode": {"sampling": True}}, r"data.corpora\[1\].decode.sampling must be a mapping"),
        ({**BT, "decode": {"beem": 4}}, r"unknown config key data.corpora\[1\].decode.beem; did you mean "),
        # The flat keys of earlier versions: read into decode, checked there, never beside it.
        (
            {**BT, "top_k": 10},
            r"^data.corpora\[1\].top_k is a sampling option: write it as data.corpora\[1\]",
        ),
        ({**BT, "sampling": True, "beam_size": 5}, r"^data.corpora\[1\].decode.beam: sampling draws one"),
        ({**BT, "sampling": True, "top_k": 0}, r"^data.corpora\[1\].decode.sampling.top_k: top-k 0 must"),
        ({**BT, "beam_size": 0}, r"^data.corpora\[1\].decode.beam: beam size 0 must be at least 1"),
        ({**BT, "sampling": "yes"}, r"^data.corpora\[1\].sampling='yes' must be true or false"),
        (
            {**BT, "beam_size": 4, "decode": {}},
            r"^data.corpora\[1\].beam_size is the old spelling of a key of",
        ),
        ({**BT, "side": "left"}, r"data.corpora\[1\].side='left' is not valid; choose one of target, source"),
        ({**BT, "cache_dir": " "}, r"data.corpora\[1\].cache_dir is empty"),
        (
            {**BT, "tg": "<bt>"},
            r"unknown config key data.corpora\[1\].tg; did you mean data.corpora\[1\].tag",
        ),
    ],
)
def test_bad_backtranslation_keys_are_config_errors(entry: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        corpus_config(entry)


def test_a_backtranslation_corpus_cannot_come_first_or_be_the_only_source() -> None:
    with pytest.raises(ConfigError, match=r"data.corpora\[0\].source=backtranslation cannot come first"):
        config_from_dict({"data": {"corpora": [BT]}})
    with pytest.raises(ConfigError, match="data.source='backtranslation' is not valid"):
        config_from_dict({"data": {"source": "backtranslation"}})


def test_an_entrys_decode_block_is_its_translate_options() -> None:
    entry = corpus_config({**BT, "decode": {"sampling": {}}}).data.entries()[1]
    assert synthetic.options_of(entry) == TranslateOptions(sampling=Sampling(), tgt_lang="de")
    beam = corpus_config({**BT, "decode": {"beam": 4, "length_penalty": 0.6}}).data.entries()[1]
    assert synthetic.options_of(beam) == TranslateOptions(beam=4, length_penalty=0.6, tgt_lang="de")
    default = corpus_config(BT).data.entries()[1]
    assert synthetic.options_of(default) == TranslateOptions(tgt_lang="de")  # the run's own, with scores
    assert synthetic.text_languages(entry) == ("en", "de")  # back-translation: the target is the text
