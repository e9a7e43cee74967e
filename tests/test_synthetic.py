"""source: distillation, and what every translated corpus shares (data/synthetic.py): source-side
text and a teacher's translation of it, by one run or an ensemble of runs, in mt's engine or
CTranslate2's, with its n-best list; kept in a cache with its provenance and reused; resumed after
an interruption; filtered by the teacher's score; bad teachers refused before any work.

Two tiny de->en teachers (20 updates on 400 pairs, and 5 more updates from it with another seed,
so that they share their tokenizers) translate 120 German task 2 captions for a de->en student;
a tiny en->de run is the teacher of the wrong direction.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import CONFIGS, quiet
from typer.testing import CliRunner

from mt_cli.cli import app
from mt_cli.config.options import TranslateOptions
from mt_cli.config.recipe import config_from_dict, load_config
from mt_cli.config.sections import Config
from mt_cli.data import synthetic
from mt_cli.data.corpus import train_pairs
from mt_cli.data.filters import Filtered, PairFilter
from mt_cli.decode import translator as translator_module
from mt_cli.decode.ctranslate2 import CTranslate2Engine
from mt_cli.decode.hypotheses import per_piece
from mt_cli.decode.members import ensemble_of
from mt_cli.decode.processes import BatchPool
from mt_cli.decode.translator import Translator
from mt_cli.disk.files import file_sha256
from mt_cli.disk.layout import RunDir
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.errors import CheckpointError, ConfigError, DataError
from mt_cli.export.runs import ctranslate2_model_dir
from mt_cli.runtime.precision import ComputeType
from mt_cli.text.tokenizer import Tokenizer
from mt_cli.train import backtranslation
from mt_cli.train.run import prepare, train
from mt_cli.trained import load_trained

CAPTIONS = SHIPPED_MULTI30K / "task2" / "train.1.de.gz"  # German captions, not task 1's
LINES = 120
SMALL = ["data.train_limit=400", "train.amp=off", "train.test_at_end=false", "train.val_bleu=false"]
TEACHER = [*SMALL, "train.max_steps=20", "train.validate_every_steps=20", "train.average_last=0"]
DECODE = {"beam": 3, "n_best": 2, "length_penalty": 0.6}


@pytest.fixture(scope="module")
def teachers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two de->en runs with the same tokenizers (the second a warm start of the first)."""
    root = tmp_path_factory.mktemp("teachers")
    train(load_config(CONFIGS / "tiny.yaml", TEACHER), root / "a", resume=False, log=quiet)
    more = [
        "train.max_steps=5",
        "train.validate_every_steps=5",
        "train.seed=2",
        f"train.init_from={root / 'a'}",
    ]
    train(load_config(CONFIGS / "tiny.yaml", [*TEACHER, *more]), root / "b", resume=False, log=quiet)
    return root / "a", root / "b"


@pytest.fixture(scope="module")
def reverse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An en->de run: a teacher of the wrong direction, with tokenizers of other languages."""
    run = tmp_path_factory.mktemp("reverse") / "en-de"
    overrides = [*TEACHER, "data.src_lang=en", "data.tgt_lang=de"]
    train(load_config(CONFIGS / "tiny.yaml", overrides), run, resume=False, log=quiet)
    return run


@pytest.fixture(scope="module")
def text(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("text") / "captions.de"
    path.write_text("".join(line + "\n" for line in read_lines(CAPTIONS)[:LINES]), encoding="utf-8")
    return path


def distillation(teachers: tuple[Path, Path], text: Path, cache: Path, **keys: object) -> dict:
    """A distillation entry: the two teachers as an ensemble, their 2-best lists of ``text``."""
    first, second = teachers
    entry = {"source": "distillation", "run": str(first), "ensemble": [str(second)], "text": [str(text)]}
    return {**entry, "decode": DECODE, "cache_dir": str(cache), **keys}


def with_corpus(entry: dict, *overrides: str) -> Config:
    """The tiny recipe on the first 400 Multi30k pairs plus ``entry``."""
    corpora = [{"source": "multi30k"}, entry]
    return load_config(CONFIGS / "tiny.yaml", [*SMALL, f"data.corpora={json.dumps(corpora)}", *overrides])


def made(cfg: Config) -> synthetic.Synthetic:
    return synthetic.resolve(cfg.data.entries()[1])


def manifest_of(run: Path, key: str, value: object) -> dict:
    """The manifest of the run's prepared corpus whose recipe has ``key`` equal to ``value``."""
    manifests = [json.loads(p.read_text()) for p in sorted((run / "prepared").glob("*/manifest.json"))]
    [found] = [m for m in manifests if m["recipe"].get(key) == value]
    return found


class Terminal(io.StringIO):
    """Standard error as a terminal: tqdm draws its bar there."""

    def isatty(self) -> bool:
        return True


def no_model(*args: object, **kwargs: object) -> None:
    raise AssertionError("the cached translations were not reused")


@pytest.fixture(scope="module")
def distilled(teachers: tuple[Path, Path], text: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """`mt prepare` of a de->en student with the ensemble's 2-best lists of the text, on two
    decoding processes: (its config, its run, the batches each worker-pool call took)."""
    root = tmp_path_factory.mktemp("distilled")
    cfg = with_corpus(distillation(teachers, text, root / "cache"))
    pooled: list[int] = []
    original = BatchPool.map

    def counted(self: BatchPool, tasks: list) -> list:
        pooled.append(len(tasks))
        return original(self, tasks)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(translator_module, "default_processes", lambda device: 2)
        patch.setattr(BatchPool, "map", counted)
        prepare(cfg, root / "run", quiet)
    return cfg, root / "run", pooled


def test_the_pairs_are_the_ensembles_n_best_lists_as_mt_translate_gives_them(
    teachers: tuple[Path, Path], text: Path, distilled: tuple
) -> None:
    cfg, _, pooled = distilled
    first, second = teachers
    args = ["translate", "--run", str(first), "--ensemble", str(second), "--beam", "3", "--n-best", "2"]
    args += ["--length-penalty", "0.6", "--compute-type", "float32", "--device", "cpu", "-i", str(text)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = [line.split(" ||| ") for line in result.stdout.splitlines()]
    lines = read_lines(text)
    assert [int(number) for number, _, _ in rows] == [i for i in range(LINES) for _ in range(2)]
    pairs = list(train_pairs(cfg.data.entries()[1]))
    assert [src for src, _ in pairs] == [line for line in lines for _ in range(2)]  # the text, each twice
    assert [tgt for _, tgt in pairs] == [text for _, text, _ in rows]  # mt translate --ensemble --n-best 2
    assert sum(a != b for a, b in zip(pairs[::2], pairs[1::2])) > LINES // 2  # two hypotheses, not one twice
    members = [Translator.of(load_trained(run), "cpu", ComputeType.FLOAT32) for run in teachers]
    found = ensemble_of(members).translate(lines, TranslateOptions(**DECODE))
    hypotheses = [h for t in found for h in t.hypotheses]
    assert [float(score) for *_, score in rows] == pytest.approx([h.score for h in hypotheses], abs=1e-4)
    # Each pair's score: the mean log-probability per piece, whatever the length penalty.
    expected = [per_piece(h.score, len(h.tokens), 0.6) for h in hypotheses]
    assert list(made(cfg).scores()) == pytest.approx(expected, abs=1e-5)
    assert all(score < 0 for score in expected)
    assert pooled and max(pooled) >= 2  # the batches went to the worker processes


def test_the_provenance_names_every_teacher_and_is_in_the_manifest(
    teachers: tuple[Path, Path], distilled: tuple
) -> None:
    cfg, run, _ = distilled
    (first, second), pairs = teachers, made(cfg)
    provenance = pairs.provenance()
    best = RunDir(first).best, RunDir(second).best
    assert provenance["run"] == str(first) and provenance["checkpoint"] == str(best[0])
    assert provenance["checkpoint_sha256"] == file_sha256(best[0])
    member = {"run": str(second), "checkpoint": str(best[1]), "checkpoint_sha256": file_sha256(best[1])}
    assert provenance["ensemble"] == [member]
    assert provenance["engine"] == "mt" and provenance["direction"] == "de->en"
    assert provenance["decoding"] == TranslateOptions(**DECODE, tgt_lang="en").record()
    assert "glossary" not in provenance["decoding"]  # fields mt added later, at their defaults: the same key
    assert (provenance["lines"], provenance["pairs"], provenance["cut"]) == (LINES, 2 * LINES, 0)
    assert pairs.key_inputs()["checkpoints_sha256"] == [file_sha256(path) for path in best]
    manifest = manifest_of(run, "origin", provenance)
    assert manifest["read"] == manifest["pairs"] + sum(manifest["dropped"].values()) == 2 * LINES
    fingerprint = {"synthetic": pairs.key, "side": "source", "train_limit": 400, "min_score": None}
    assert manifest["recipe"]["train"] == fingerprint
    assert not pairs.partial.directory.exists()  # the chunks went when the folder was whole


def test_a_second_run_reuses_the_translations_and_a_changed_teacher_gets_new_ones(
    teachers: tuple[Path, Path], text: Path, distilled: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg, _, _ = distilled
    stamp = (made(cfg).directory / synthetic.PROVENANCE).stat().st_mtime_ns
    monkeypatch.setattr(backtranslation, "load_trained", no_model)
    heard: list[str] = []
    prepare(cfg, tmp_path / "run", heard.append)
    assert any("reusing 240 synthetic pairs" in line and "1 more in an ensemble" in line for line in heard)
    assert (made(cfg).directory / synthetic.PROVENANCE).stat().st_mtime_ns == stamp
    copy = tmp_path / "b"  # the second teacher, its checkpoint changed by a byte
    shutil.copytree(teachers[1], copy)
    with open(RunDir(copy).best, "ab") as checkpoint:
        checkpoint.write(b"\0")
    cache = made(cfg).directory.parent
    changed = made(with_corpus(distillation((teachers[0], copy), text, cache)))
    alone = made(with_corpus(distillation(teachers, text, cache, ensemble=[])))
    greedy = made(with_corpus(distillation(teachers, text, cache, decode={"beam": 1})))
    keys = {made(cfg).key, changed.key, alone.key, greedy.key}
    assert len(keys) == 4 and not any(pairs.exists() for pairs in (changed, alone, greedy))


def test_an_interrupted_translation_goes_on_after_its_last_whole_chunk(
    teachers: tuple[Path, Path], text: Path, distilled: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = with_corpus(distillation(teachers, text, tmp_path / "cache"))
    calls: list[int] = []
    translate = Translator.translate

    def interrupted(self: Translator, lines: list[str], *args: object, **kwargs: object) -> list:
        calls.append(len(lines))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return translate(self, lines, *args, **kwargs)

    monkeypatch.setattr(backtranslation, "CHUNK", 50)
    monkeypatch.setattr(Translator, "translate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare(cfg, tmp_path / "run", quiet)
    assert calls == [50, 50, 20]
    assert made(cfg).partial.done() == 100 and not made(cfg).exists()
    with pytest.raises(DataError, match="are not made yet"):
        list(train_pairs(cfg.data.entries()[1]))
    calls.clear()
    heard: list[str] = []
    terminal = Terminal()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stderr", terminal)
        prepare(cfg, tmp_path / "run", heard.append)
    assert calls == [20]  # only what the interrupted run had not kept
    # At a terminal a progress bar, from where the kept chunks end, and no line per chunk.
    assert "translate:  83%" in terminal.getvalue() and "100/120" in terminal.getvalue()
    assert "120/120" in terminal.getvalue() and not any("lines translated (" in line for line in heard)
    assert any(
        "translating 20 lines" in line and "the first 100 were translated before" in line for line in heard
    )
    assert os.listdir(tmp_path / "cache") == [made(cfg).key]  # whole, and the chunks gone
    provenance = made(cfg).provenance()
    assert (provenance["lines"], provenance["pairs"]) == (LINES, 2 * LINES)
    whole = made(distilled[0])  # the same pairs as the translation that was never interrupted
    for name in (synthetic.TEXT, synthetic.TRANSLATION):
        assert read_lines(made(cfg).directory / name) == read_lines(whole.directory / name)
    assert list(made(cfg).scores()) == pytest.approx(list(whole.scores()), abs=1e-4)


def test_pairs_under_min_score_are_left_out_and_counted_in_the_manifest(
    teachers: tuple[Path, Path], text: Path, distilled: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg, _, _ = distilled
    everything, scores = list(train_pairs(cfg.data.entries()[1])), list(made(cfg).scores())
    threshold = sorted(scores)[len(scores) // 2]
    entry = distillation(
        teachers, text, made(cfg).directory.parent, min_score=threshold, max_length_ratio=1.5
    )
    filtered = with_corpus(entry)
    monkeypatch.setattr(backtranslation, "load_trained", no_model)  # the same translations, reused
    heard: list[str] = []
    prepare(filtered, tmp_path / "run", heard.append)
    kept = [pair for pair, score in zip(everything, scores) if score >= threshold]
    assert list(train_pairs(filtered.data.entries()[1])) == kept
    below = len(everything) - len(kept)
    assert 0 < below < len(everything)
    manifest = manifest_of(tmp_path / "run", "max_length_ratio", 1.5)  # the real pairs' is null
    assert manifest["dropped"]["score"] == below
    assert manifest["read"] == len(everything) == manifest["pairs"] + sum(manifest["dropped"].values())
    assert manifest["recipe"]["train"]["min_score"] == threshold
    # The entry's length ratio, on the student's pieces, counted as the data section's would be.
    students = [Tokenizer.load(tmp_path / "run" / f"spm.{lang}.model", lang) for lang in ("de", "en")]
    ratio = Filtered()
    sources, targets = ([pair[side] for pair in kept] for side in (0, 1))
    pieces = students[0].encode(sources), students[1].encode(targets)
    PairFilter(filtered.data.max_len, 1.5).keep(*pieces, kept, ratio)
    assert manifest["dropped"]["ratio"] == ratio.ratio > 0
    assert any(f"under min_score {below}" in line for line in heard), heard


def test_a_teacher_with_a_ctranslate2_export_translates_in_ctranslate2(
    teachers: tuple[Path, Path], text: Path, tmp_path: Path
) -> None:
    first = teachers[0]
    entry = {"source": "distillation", "run": str(first), "engine": "ctranslate2", "text": [str(text)]}
    cfg = with_corpus({**entry, "decode": {"beam": 3}, "cache_dir": str(tmp_path / "cache")})
    with pytest.raises(CheckpointError, match=r"^data.corpora\[1\].engine: .* has no CTranslate2 export of"):
        prepare(cfg, tmp_path / "run", quiet)
    assert not (tmp_path / "cache").exists() or os.listdir(tmp_path / "cache") == []
    model_dir = ctranslate2_model_dir(first, None)  # what --engine ctranslate2 makes and keeps
    prepare(cfg, tmp_path / "run", quiet)
    expected = CTranslate2Engine(model_dir, "cpu", ComputeType.FLOAT32).translate(
        read_lines(text), TranslateOptions(beam=3)
    )
    assert [tgt for _, tgt in train_pairs(cfg.data.entries()[1])] == [t.text for t in expected]
    assert made(cfg).provenance()["engine"] == "ctranslate2"
    in_mt = made(with_corpus({**entry, "engine": "mt", "decode": {"beam": 3}}))
    assert in_mt.key != made(cfg).key  # another engine, other translations


def mt_prepare(corpora: list[dict], cwd: Path) -> subprocess.CompletedProcess:
    args = ["prepare", "--config", "tiny", "--run", "new", "--set", f"data.corpora={json.dumps(corpora)}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mt_cli", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"run": "{reverse}"},
            "data.corpora[2].run: {reverse} translates en->de, but forward translation of this corpus's de "
            "text (its source side) needs a run that translates de->en",
        ),
        (
            {"ensemble": ["{reverse}"]},
            "data.corpora[2].ensemble: ensemble members must share their tokenizers exactly; these differ "
            "from {a}/checkpoints/best.pt: {reverse}/checkpoints/best.pt (source, target, languages en-de)",
        ),
        ({"run": "{a}:nope"}, "data.corpora[2].run: {a}/checkpoints/nope.pt does not exist (checkpoints in"),
        ({"ensemble": ["missing"]}, "data.corpora[2].ensemble: run directory missing does not exist"),
        (
            {"decode": {"beam": 2, "n_best": 3}},
            "data.corpora[2].decode.n_best: n-best 3 cannot exceed the beam size 2",
        ),
    ],
)
def test_bad_teachers_are_one_line_before_any_work(
    teachers: tuple[Path, Path], reverse: Path, text: Path, tmp_path: Path, entry: dict, message: str
) -> None:
    names = {"{a}": str(teachers[0]), "{reverse}": str(reverse)}

    def named(value: str) -> str:
        for name, path in names.items():
            value = value.replace(name, path)
        return value

    cache = tmp_path.parent / f"{tmp_path.name}-cache"
    good = {"source": "distillation", "run": str(teachers[0]), "text": [str(text)], "cache_dir": str(cache)}
    bad = json.loads(named(json.dumps({**good, **entry})))
    runs = [*teachers, reverse]
    before = [sorted(p.relative_to(run) for p in run.rglob("*")) for run in runs]
    # A good corpus first: nothing of it is translated either, every teacher is checked first.
    result = mt_prepare([{"source": "multi30k"}, good, bad], tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert named(message) in result.stderr
    assert os.listdir(tmp_path) == [] and (not cache.exists() or os.listdir(cache) == [])
    assert [sorted(p.relative_to(run) for p in run.rglob("*")) for run in runs] == before


DISTIL = {"source": "distillation", "run": "runs/de-en", "text": ["captions.de"]}


def corpus_config(entry: dict) -> Config:
    return config_from_dict({"data": {"corpora": [{"source": "multi30k"}, entry]}})


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {**DISTIL, "decode": {"sampling": {"top_k": 10}}},
            r"^data.corpora\[1\].decode.sampling: distillation learns the teacher's beam search, not its",
        ),
        ({**DISTIL, "side": "source"}, r"^data.corpora\[1\].side has no meaning for source=distillation"),
        (
            {**DISTIL, "engine": "ctranslate2", "ensemble": ["runs/b"]},
            r"^data.corpora\[1\].ensemble needs engine: mt \(CTranslate2 has no ensembles\)",
        ),
        ({**DISTIL, "engine": "marian"}, r"engine='marian' is not valid; choose one of mt, ctranslate2"),
        ({**DISTIL, "ensemble": [" "]}, r"^data.corpora\[1\].ensemble has an empty entry"),
        (
            {**DISTIL, "min_score": 0.5},
            r"^data.corpora\[1\].min_score=0.5 must be a log-probability per piece",
        ),
        ({**DISTIL, "max_length_ratio": 0.5}, r"^data.corpora\[1\].max_length_ratio=0.5 must be at least 1"),
        ({**DISTIL, "run": None}, r"^data.corpora\[1\].source=distillation needs data.corpora\[1\].run"),
        (
            {**DISTIL, "decode": {"align": True}},
            r"^data.corpora\[1\].decode.align has no meaning for a transl",
        ),
        (
            {"source": "multi30k", "ensemble": ["runs/b"]},
            r"^data.corpora\[1\].ensemble is a key of source=backtranslation and source=distillation",
        ),
        ({"source": "multi30k", "min_score": -1}, r"^data.corpora\[1\].min_score is a key of source=back"),
    ],
)
def test_bad_distillation_keys_are_config_errors(entry: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        corpus_config(entry)


def test_a_distillation_corpus_cannot_come_first_and_its_text_is_the_source_side() -> None:
    with pytest.raises(ConfigError, match=r"data.corpora\[0\].source=distillation cannot come first"):
        config_from_dict({"data": {"corpora": [DISTIL]}})
    entry = corpus_config({**DISTIL, "decode": {"beam": 4, "n_best": 4}, "min_score": -2}).data.entries()[1]
    assert entry.translated and entry.text_side == "source" and entry.min_score == -2.0
    assert synthetic.text_languages(entry) == ("de", "en")
    assert synthetic.options_of(entry) == TranslateOptions(beam=4, n_best=4, tgt_lang="en")


def test_kept_chunks_count_only_from_the_first_line_on_without_a_gap(tmp_path: Path) -> None:
    partial = synthetic.Partial(tmp_path / "key.partial")
    assert partial.done() == 0 and list(partial.chunks()) == []

    def chunk(first: int, count: int) -> synthetic.Chunk:
        lines = [f"line {i}" for i in range(first, first + count)]
        return synthetic.Chunk(first, lines, [[f"{line}!"] for line in lines], [[-0.5]] * count, 0, 1.0)

    for first, count in ((0, 3), (3, 3), (10, 3)):  # lines 6 to 9 never kept: the chunk at 10 waits
        partial.save(chunk(first, count))
    (partial.directory / ".000000000006-000000000009.json.tmp").write_text("half")  # an unfinished write
    assert partial.done() == 6
    assert [c.first for c in partial.chunks()] == [0, 3]
    totals = synthetic.write_pairs(partial.chunks(), tmp_path)
    assert (totals.lines, totals.pairs, totals.seconds) == (6, 6, 2.0)
    assert read_lines(tmp_path / synthetic.TRANSLATION) == [f"line {i}!" for i in range(6)]
    partial.remove()
    assert not partial.directory.exists()
