"""`mt import` (``mt_cli.pretrained.importing``): a Marian model saved by transformers, with
opus-mt-de-en's options and a vocab.json whose ids are not SentencePiece's, becomes an mt run that
tokenizes as MarianTokenizer, and decodes as ``generate``, greedy and beam; bad sources are one
line and leave nothing behind; the hub path works from a cache in the hub's own layout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from marian_models import fine_tune_recipe, generate, multi30k, save_marian

from mt_cli.config.options import TranslateOptions
from mt_cli.decode.hypotheses import output_limit
from mt_cli.decode.translator import Translator
from mt_cli.errors import EXIT_FAILURE, EXIT_USAGE
from mt_cli.pretrained.importing import import_model
from mt_cli.runtime.precision import ComputeType
from mt_cli.trained import TrainedModel, load_trained

transformers = pytest.importorskip("transformers")

UNKNOWN = ["Ein Hund 🐕 läuft über die Straße ☃.", "", "Zwei   Männer\tspielen Fußball."]


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    """The tiny Marian model's matmuls gain nothing from a second thread, and on a busy 2-core
    machine the threads' synchronisation makes its training and decoding several times slower
    (250 updates: 64 s on one thread, over 5 minutes on two beside another busy process)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def marian_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 250 updates: 800 distinct greedy outputs of test2016's 1,000 (the test below needs 500),
    # and generate's lines met as often as after 400 (996-1000 of 1,000 here, 995-1000 there).
    return save_marian(tmp_path_factory.mktemp("marian") / "opus-mt-tiny-de-en", steps=250)


@pytest.fixture(scope="module")
def imported(marian_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> TrainedModel:
    run = tmp_path_factory.mktemp("imported") / "run"
    import_model(str(marian_dir), run)
    return load_trained(run)


@pytest.fixture(scope="module")
def hf(marian_dir: Path) -> tuple[Any, Any]:
    tokenizer = transformers.MarianTokenizer.from_pretrained(marian_dir)
    return tokenizer, transformers.MarianMTModel.from_pretrained(marian_dir).eval()


def test_tokenization_equals_marian_tokenizer_on_test2016(
    imported: TrainedModel, hf: tuple[Any, Any]
) -> None:
    tokenizer, _ = hf
    table = tokenizer.get_vocab()
    sources, targets = multi30k("test_2016_flickr", "de") + UNKNOWN, multi30k("test_2016_flickr", "en")
    for ours, texts, expected in (
        (imported.src_tok, sources, tokenizer(sources)["input_ids"]),
        (imported.tgt_tok, targets, tokenizer(text_target=targets)["input_ids"]),
    ):
        pieces = [ours.to_pieces(ids) + ["</s>"] for ids in ours.encode(texts)]
        assert [[table[piece] for piece in row] for row in pieces] == expected
    unknown = imported.src_tok.encode(UNKNOWN[:1])[0]
    assert unknown.count(1) == 2  # 🐕 and ☃ are <unk> (mt's id 1), as MarianTokenizer has them
    # The premise: Marian's ids are not SentencePiece's.
    spm_ids = imported.src_tok.sp.encode(sources[:50])
    assert sum(a != b for row, ref in zip(spm_ids, expected[:50]) for a, b in zip(row, ref)) > 100


@torch.no_grad()
def test_teacher_forced_logits_equal_transformers(imported: TrainedModel, hf: tuple[Any, Any]) -> None:
    tokenizer, marian = hf
    sources, targets = multi30k("test_2016_flickr", "de")[:16], multi30k("test_2016_flickr", "en")[:16]
    batch = tokenizer(sources, text_target=targets, return_tensors="pt", padding=True)
    pad = tokenizer.pad_token_id
    start = torch.full((16, 1), pad)
    decoder_in = torch.cat([start, batch["labels"][:, :-1]], 1)  # (B, T)
    expected = marian(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], decoder_input_ids=decoder_in
    ).logits  # (B, T, V)
    to_mt = {
        marian_id: imported.src_tok.piece_id(piece) for piece, marian_id in tokenizer.get_vocab().items()
    }
    to_mt[pad] = 0
    src = batch["input_ids"].clone().apply_(to_mt.__getitem__)
    tgt = decoder_in.clone().apply_(to_mt.__getitem__)
    tgt[:, 0] = 2  # <s>: Marian's start row
    causal = torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool).tril()
    ours = imported.model(src, tgt, (src != 0)[:, None, None, :], causal[None, None])  # (B, T, V + 1)
    columns = [to_mt[i] if i != pad else 0 for i in range(expected.shape[-1])]
    real = batch["labels"] != pad  # positions whose input is not padding
    diff = (ours[..., columns] - expected)[real].abs().max().item()
    assert diff < 1e-4, diff


@pytest.mark.parametrize(
    ("beams", "alpha"), [(1, 1.0), pytest.param(4, 1.0, marks=pytest.mark.slow), (4, 0.6)]
)
def test_greedy_and_beam_equal_generate_on_1000_lines(
    imported: TrainedModel, hf: tuple[Any, Any], beams: int, alpha: float
) -> None:
    lines = multi30k("test_2016_flickr", "de")  # 1,000 lines
    translator = Translator.of(imported, "cpu", ComputeType.FLOAT32)
    options = TranslateOptions(beam=beams, length_penalty=alpha)
    ours = [t.text for t in translator.translate(lines, options)]
    expected, _ = generate(*hf, lines, beams, alpha, imported.card)
    same = sum(a == b for a, b in zip(ours, expected, strict=True))
    assert len(set(expected)) > 500  # outputs that differ, from a model that learnt something
    assert same >= 0.99 * len(lines), [(a, b) for a, b in zip(ours, expected) if a != b][:3]


def test_the_card_names_the_parent_and_the_run_has_what_a_run_has(
    marian_dir: Path, imported: TrainedModel
) -> None:
    from mt_cli.disk.files import file_sha256

    parent = imported.card.parent
    assert parent is not None and parent.run == str(marian_dir) and parent.revision is None
    assert parent.sha256 == file_sha256(marian_dir / "model.safetensors")
    assert imported.card.decode.beam_size == 4  # generation_config.json's num_beams
    assert imported.card.src_vocabulary == "spm.de.vocab.json" and imported.model.output.bias is not None
    run = imported.checkpoint.parent.parent
    assert {p.name for p in run.iterdir()} == {
        "config.yaml", "checkpoints", "spm.de.model", "spm.en.model", "spm.de.vocab.json", "spm.en.vocab.json"
    }  # fmt: skip


def _mt(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**(os.environ if env is None else env), "OMP_NUM_THREADS": "1"}  # as _one_thread
    return subprocess.run(
        [sys.executable, "-m", "mt_cli", *args], capture_output=True, text=True, env=env, timeout=300
    )


def _broken(marian_dir: Path, tmp_path: Path, how: str) -> Path:
    copy = tmp_path / "broken"
    shutil.copytree(marian_dir, copy)
    if how == "no weights":
        (copy / "model.safetensors").unlink()
    elif how == "corrupt weights":
        data = (copy / "model.safetensors").read_bytes()
        (copy / "model.safetensors").write_bytes(data[: len(data) // 2])
    elif how == "another model type":
        config = json.loads((copy / "config.json").read_text())
        (copy / "config.json").write_text(json.dumps(config | {"model_type": "bart"}))
    elif how == "vocabulary of another size":
        vocab = json.loads((copy / "vocab.json").read_text())
        (copy / "vocab.json").write_text(json.dumps(vocab | {"▁extra": len(vocab)}))
    elif how == "no tokenizer":
        (copy / "source.spm").unlink()
    return copy


FAULTS = {
    "no weights": "holds no weights",
    "corrupt weights": "not a readable weights file",
    "another model type": "'bart' model",
    "vocabulary of another size": "do not belong together",
    "no tokenizer": "source.spm",
}


@pytest.mark.parametrize("how", FAULTS)
def test_a_bad_source_is_one_line_exit_2_and_no_run(marian_dir: Path, tmp_path: Path, how: str) -> None:
    run = tmp_path / "run"
    result = _mt("import", str(_broken(marian_dir, tmp_path, how)), "--run", str(run))
    assert result.returncode == EXIT_USAGE, result.stderr
    assert FAULTS[how] in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert not run.exists() and [p.name for p in tmp_path.iterdir()] == ["broken"]


def _hub_cache(marian_dir: Path, home: Path, repo: str, commit: str) -> None:
    """huggingface_hub's cache layout (HF_HOME/hub/models--OWNER--NAME/{refs,snapshots})."""
    folder = home / "hub" / f"models--{repo.replace('/', '--')}"
    shutil.copytree(marian_dir, folder / "snapshots" / commit)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)


def test_a_hub_id_imports_from_the_cache_offline_and_names_its_revision(
    marian_dir: Path, tmp_path: Path
) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    _hub_cache(marian_dir, tmp_path / "hf", "Helsinki-NLP/opus-mt-tiny", commit)
    env = os.environ | {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    result = _mt("import", "hf:Helsinki-NLP/opus-mt-tiny", "--run", str(tmp_path / "run"), env=env)
    assert result.returncode == 0, result.stderr
    parent = load_trained(tmp_path / "run").card.parent
    assert parent is not None and (parent.run, parent.revision) == ("hf:Helsinki-NLP/opus-mt-tiny", commit)
    missing = _mt("import", "hf:Helsinki-NLP/opus-mt-de-en", "--run", str(tmp_path / "other"), env=env)
    assert missing.returncode == EXIT_FAILURE and "unreachable" in missing.stderr
    assert missing.stderr.count("\n") == 1 and not (tmp_path / "other").exists()


def test_init_from_a_marian_directory_starts_where_its_import_does(
    marian_dir: Path, imported: TrainedModel, tmp_path: Path
) -> None:
    from helpers import quiet

    from mt_cli.checkpoint import Checkpoint
    from mt_cli.config.recipe import load_config
    from mt_cli.disk.files import file_sha256
    from mt_cli.train.run import train
    from mt_cli.train.warm_start import parent_sections

    recipe = fine_tune_recipe(tmp_path / "finetune.yaml", pairs=1000, steps=10, validate_every=10)
    first_losses = []
    for name, parent in (("direct", marian_dir), ("via-run", imported.checkpoint.parent.parent)):
        cfg = load_config(recipe, [f"train.init_from={parent}"], parent_sections)
        train(cfg, tmp_path / name, resume=False, log=quiet)
        rows = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
        first_losses.append(next(row["loss"] for row in rows if row["event"] == "val"))
    assert first_losses[0] == first_losses[1]
    card = Checkpoint.load(tmp_path / "direct" / "checkpoints" / "best.pt").card
    assert card.parent is not None and card.parent.run == str(marian_dir)
    assert card.parent.sha256 == file_sha256(marian_dir / "model.safetensors")
    assert (tmp_path / "direct" / "spm.de.vocab.json").read_bytes() == (
        imported.checkpoint.parent.parent / "spm.de.vocab.json"
    ).read_bytes()


def test_a_published_model_shrinks_to_fewer_layers(
    marian_dir: Path, imported: TrainedModel, tmp_path: Path
) -> None:
    from mt_cli.config.recipe import load_config
    from mt_cli.disk.layout import RunDir
    from mt_cli.train.warm_start import find_parent, parent_sections

    recipe = fine_tune_recipe(tmp_path / "finetune.yaml", pairs=1000, steps=10, validate_every=10)
    overrides = [f"train.init_from={marian_dir}", "model.decoder_layers=1"]
    cfg = load_config(recipe, overrides, parent_sections)
    (tmp_path / "child").mkdir()
    parent = find_parent(str(marian_dir), cfg, RunDir(tmp_path / "child"))
    full = imported.model.state_dict()  # the same conversion, all of it
    assert parent.layers == {"decoder": [0]} and cfg.model.encoder_layers == 2
    assert not any(name.startswith("decoder.1.") for name in parent.weights)
    assert set(parent.weights) == {name for name in full if not name.startswith("decoder.1.")}
    assert all(torch.equal(parent.weights[name], full[name]) for name in parent.weights)


def test_everything_that_takes_a_run_takes_an_import(imported: TrainedModel, tmp_path: Path) -> None:
    """translate (both engines), eval, score, --ensemble, serve, and every export: the imported run
    is an ordinary run. The exports are checked by reading them back: Hugging Face by importing
    it again (line-identical), Argos by its package's files."""
    import httpx
    from helpers import start_server

    run = str(imported.checkpoint.parent.parent)
    lines = multi30k("test_2016_flickr", "de")[:20]
    (tmp_path / "src.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "ref.en").write_text(
        "\n".join(multi30k("test_2016_flickr", "en")[:20]) + "\n", encoding="utf-8"
    )
    ours = Translator.of(imported, "cpu", ComputeType.FLOAT32)
    translations = ours.translate(lines)
    expected = [t.text for t in translations]
    # Where mt's best runs to its length limit, mt scores a forced EOS and CTranslate2 stops
    # (tests/test_export_ctranslate2.py): a random model's runaways are compared in mt only.
    dec, positions = ours.card.decode, ours.card.model.max_positions
    sources = ours.encode_sources(lines, warn=lambda message: None)
    ended = [
        i
        for i, (ids, found) in enumerate(zip(sources, translations, strict=True))
        if len(found.best.tokens) < output_limit(len(ids), dec.max_len_a, dec.max_len_b, positions) - 1
    ]
    assert len(ended) >= len(lines) // 2
    for engine in ("mt", "ctranslate2"):
        found = _mt("translate", "--run", run, "-i", str(tmp_path / "src.de"), "--engine", engine,
                    "--compute-type", "float32")  # fmt: skip
        assert found.returncode == 0, found.stderr
        if engine == "mt":
            assert found.stdout.splitlines() == expected
        else:
            assert [found.stdout.splitlines()[i] for i in ended] == [expected[i] for i in ended]
    ensemble = _mt("translate", "--run", run, "--ensemble", run, "-i", str(tmp_path / "src.de"),
                   "--compute-type", "float32")  # fmt: skip
    assert ensemble.returncode == 0 and ensemble.stdout.splitlines() == expected, ensemble.stderr
    scored = _mt(
        "eval", "--run", run, "--src", str(tmp_path / "src.de"), "--ref", str(tmp_path / "ref.en"), "--json"
    )
    assert scored.returncode == 0 and 0 < json.loads(scored.stdout)["bleu"] <= 100, scored.stderr
    score = _mt("score", "--run", run, "--src", str(tmp_path / "src.de"), "--tgt", str(tmp_path / "ref.en"))
    assert score.returncode == 0 and len(score.stdout.splitlines()) == 20, score.stderr
    exported = _mt("export", "--run", run, "-f", "huggingface", "-o", str(tmp_path / "hf"))
    assert exported.returncode == 0, exported.stderr
    again = import_model(str(tmp_path / "hf"), tmp_path / "again")
    assert again.config.model == imported.card.model
    back = Translator.of(load_trained(tmp_path / "again"), "cpu", ComputeType.FLOAT32)
    assert [t.text for t in back.translate(lines)] == expected
    argos = _mt("export", "--run", run, "-f", "argos", "-o", str(tmp_path / "de_en.argosmodel"))
    assert argos.returncode == 0 and (tmp_path / "de_en.argosmodel").stat().st_size > 0, argos.stderr
    server = start_server(Path(run), "--compute-type", "float32")
    try:
        answer = httpx.post(f"{server.url}/translate", json={"q": lines[:3], "source": "de", "target": "en"})
        assert answer.status_code == 200 and answer.json()["translatedText"] == expected[:3]
    finally:
        server.stop()


def test_a_multilingual_models_codes_become_target_tags(tmp_path: Path) -> None:
    """OPUS-MT's multi-target models read ``>>xx<<`` before a source: imported, each is mt's tag
    ``<2xx>``, the targets are those languages, and the ids are MarianTokenizer's."""
    from mt_cli.specials import EOS_PIECE

    directory = save_marian(tmp_path / "multi", steps=0, codes=("fr", "cs"))
    import_model(str(directory), tmp_path / "run", tgt_lang="cs")
    trained = load_trained(tmp_path / "run")
    assert trained.card.data.languages() == (("de",), ("cs", "fr")) and trained.card.data.uses_target_tags()
    tokenizer = transformers.MarianTokenizer.from_pretrained(directory)
    table = tokenizer.get_vocab()
    for code in ("fr", "cs"):
        line = "Ein Hund läuft über die Wiese."
        ids = trained.src_tok.encode([f"<2{code}> {line}"])[0]
        pieces = trained.src_tok.to_pieces(ids)
        assert pieces[0] == f"<2{code}>"
        marian = [table[f">>{code}<<"]] + [table[piece] for piece in pieces[1:]] + [table[EOS_PIECE]]
        assert marian == tokenizer(f">>{code}<< {line}")["input_ids"]
