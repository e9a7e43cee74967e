"""The CTranslate2 export and engine: CTranslate2 decodes a run's model as mt does, greedy token for
token, with beam search line for line but for a rare line where the two searches end differently
(``helpers.assert_ctranslate2_searches_agree``)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest
import sacrebleu
import torch
from helpers import assert_ctranslate2_searches_agree

from mt_cli.config.options import TranslateOptions
from mt_cli.decode.ctranslate2 import CTranslate2Engine
from mt_cli.decode.translator import Translator
from mt_cli.disk.layout import ExportFiles
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.errors import InputError
from mt_cli.export.ctranslate2 import POSITIONS, Quantization, export_ctranslate2
from mt_cli.export.runs import ctranslate2_model_dir
from mt_cli.model.transformer import build_model
from mt_cli.runtime.precision import ComputeType
from mt_cli.trained import TrainedModel

ctranslate2 = pytest.importorskip("ctranslate2")


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    lines = read_lines(SHIPPED_MULTI30K / "test_2016_flickr.de.gz")[:60]
    return [*lines, "", "😀 " + lines[0], "Hund " * 200]  # empty, emoji, longer than the positions


@pytest.fixture(scope="module")
def exported(trained: TrainedModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_ctranslate2(trained, tmp_path_factory.mktemp("ct2") / "model", Quantization.FLOAT32)


def test_float32_greedy_equals_mt_token_for_token(fp32: Translator, exported: Path, sentences) -> None:
    engine = CTranslate2Engine(exported)
    ours = [t.best.tokens for t in fp32.translate(sentences, TranslateOptions(beam=1))]
    theirs = [t.best.tokens for t in engine.translate(sentences, TranslateOptions(beam=1))]
    assert theirs == ours
    theirs = engine.translate_lines(sentences, TranslateOptions(beam=1))
    assert theirs == fp32.translate_lines(sentences, TranslateOptions(beam=1))
    assert theirs[-3] == ""  # an empty line stays empty


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_float32_beam_search_equals_mt(fp32: Translator, exported: Path, sentences, alpha: float) -> None:
    # The same length penalty convention (|Y| ** alpha, EOS counted) in both engines.
    engine = CTranslate2Engine(exported)
    options = TranslateOptions(beam=4, length_penalty=alpha)
    theirs = assert_ctranslate2_searches_agree(fp32, engine, sentences, options)
    assert engine.translate_lines(sentences, options) == [t.text for t in theirs]


def test_the_export_is_a_complete_model(fp32: Translator, exported: Path) -> None:
    card = json.loads((exported / ExportFiles.CARD).read_text())
    assert card["data"]["src_lang"] == "de" and card["decode"] == dataclasses.asdict(fp32.card.decode)
    config = json.loads((exported / "config.json").read_text())
    assert config["add_source_eos"] is True and config["layer_norm_epsilon"] == 1e-5
    # The tied output projection is stored once: the file holds each parameter once, in fp32,
    # and one position table (both stacks get the same one; CTranslate2 stores equal arrays once).
    unique = {id(p): p.numel() for p in fp32.model.parameters()}
    positions = POSITIONS * fp32.card.model.d_model
    expected = 4 * (sum(unique.values()) + positions)
    assert expected <= (exported / "model.bin").stat().st_size < expected * 1.02


def test_int8_is_smaller_and_still_translates(fp32: Translator, exported: Path, tmp_path: Path) -> None:
    out = export_ctranslate2(fp32, tmp_path / "int8", Quantization.INT8)
    # The weight matrices shrink 4x; the fp32 position table, biases and norms do not (0.44x here).
    assert (out / "model.bin").stat().st_size < 0.5 * (exported / "model.bin").stat().st_size
    # How close int8 comes to float32 depends on the CPU's int8 kernels (oneDNN's), so the bound is
    # BLEU of int8 against CTranslate2's own float32 output of the same model, greedy, on 300
    # test2016 lines. Measured on a Zen 5 (AVX-512), the ISA capped with ONEDNN_MAX_CPU_ISA
    # (CT2_FORCE_CPU_ISA and CT2_USE_EXPERIMENTAL_PACKED_GEMM change nothing here): 98.5 with VNNI
    # (AVX512_CORE_VNNI, AVX2_VNNI; 19 of the first 20 lines equal), 69.5 without (AVX512_CORE,
    # AVX2 as on a Zen 3, AVX, SSE41; 5 of 20 equal, 4 on a real Zen 3). An export broken by noise
    # of half each matrix's spread scores 14.5 under every one of them.
    sources = read_lines(SHIPPED_MULTI30K / "test_2016_flickr.de.gz")[:300]
    reference = CTranslate2Engine(exported).translate_lines(sources, TranslateOptions(beam=1))
    int8 = CTranslate2Engine(out).translate_lines(sources, TranslateOptions(beam=1))
    bleu = sacrebleu.corpus_bleu(int8, [reference]).score
    assert bleu > 45, f"int8 scores {bleu:.1f} BLEU against float32"


def test_a_pre_norm_model_exports_exactly(trained: TrainedModel, tmp_path: Path, sentences) -> None:
    card = dataclasses.replace(trained.card, model=dataclasses.replace(trained.card.model, norm_first=True))
    torch.manual_seed(0)
    model = build_model(card.model, trained.src_tok.vocab_size, trained.tgt_tok.vocab_size).eval()
    pre_norm = TrainedModel(card, trained.src_tok, trained.tgt_tok, model)
    engine = CTranslate2Engine(export_ctranslate2(pre_norm, tmp_path / "pre", Quantization.FLOAT32))
    translator = Translator.of(pre_norm, "cpu", ComputeType.FLOAT32)
    greedy = TranslateOptions(beam=1)
    ours = translator.translate_lines(sentences[:20], greedy)
    assert engine.translate_lines(sentences[:20], greedy) == ours


def test_a_published_models_options_export_exactly(trained: TrainedModel, tmp_path: Path, sentences) -> None:
    """What an imported Marian model has (swish, an output bias, unscaled embeddings) reaches CTranslate2."""
    options = {"activation": "swish", "output_bias": True, "scale_embeddings": False}
    card = dataclasses.replace(trained.card, model=dataclasses.replace(trained.card.model, **options))
    torch.manual_seed(0)
    model = build_model(card.model, trained.src_tok.vocab_size, trained.tgt_tok.vocab_size).eval()
    with torch.no_grad():
        model.output.bias.normal_(0.0, 2.0)  # large enough to change the greedy picks if dropped
    published = TrainedModel(card, trained.src_tok, trained.tgt_tok, model)
    engine = CTranslate2Engine(export_ctranslate2(published, tmp_path / "pub", Quantization.FLOAT32))
    translator = Translator.of(published, "cpu", ComputeType.FLOAT32)
    ours = translator.translate_lines(sentences[:20], TranslateOptions(beam=1))
    assert engine.translate_lines(sentences[:20], TranslateOptions(beam=1)) == ours
    unbiased = Translator.of(
        TrainedModel(card, trained.src_tok, trained.tgt_tok, _without_bias(model)), "cpu"
    )
    assert unbiased.translate_lines(sentences[:20], TranslateOptions(beam=1)) != ours  # the bias matters here


def _without_bias(model: torch.nn.Module) -> torch.nn.Module:
    import copy

    copied = copy.deepcopy(model)
    with torch.no_grad():
        copied.output.bias.zero_()
    return copied


def test_an_existing_output_is_refused_untouched(trained: TrainedModel, tmp_path: Path) -> None:
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "mine.txt").write_text("mine")
    with pytest.raises(InputError, match="already exists"):
        export_ctranslate2(trained, tmp_path / "keep", Quantization.FLOAT32)
    assert [p.name for p in (tmp_path / "keep").iterdir()] == ["mine.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_the_engine_option_exports_once_per_checkpoint(trained_run: Path, fp32: Translator, tmp_path) -> None:
    run = tmp_path / "run"
    subprocess.run(["cp", "-r", str(trained_run), str(run)], check=True)
    first = ctranslate2_model_dir(run, None)
    assert ctranslate2_model_dir(run, None) == first  # reused
    assert ctranslate2_model_dir(run, "last") != first  # another checkpoint, another export
    out = subprocess.run(
        ["mt", "translate", "--run", str(run), "--engine", "ctranslate2", "--beam", "1", "Ein Hund läuft."],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == fp32.translate_lines(["Ein Hund läuft."], TranslateOptions(beam=1))[0] + "\n"


def test_exporting_leaves_the_model_untouched(trained: TrainedModel, tmp_path: Path) -> None:
    before = {name: p.clone() for name, p in trained.model.state_dict().items()}
    export_ctranslate2(trained, tmp_path / "int8", Quantization.INT8)
    after = trained.model.state_dict()
    assert all(torch.equal(before[name], after[name]) for name in before)
