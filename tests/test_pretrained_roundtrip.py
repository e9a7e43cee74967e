"""A trained mt run exported to Hugging Face and imported back (``mt_cli.pretrained``): it translates
test2016 line for line as the original (stripped, as MarianTokenizer strips), greedy and beam 5;
its CTranslate2 export equals mt fp32; fine-tuned, it starts at the original's validation loss,
improves, and exports equal again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from helpers import assert_ctranslate2_searches_agree, quiet
from marian_models import fine_tune_recipe, multi30k

from mt_cli.config.options import TranslateOptions
from mt_cli.config.recipe import load_config
from mt_cli.decode.ctranslate2 import CTranslate2Engine
from mt_cli.decode.translator import Translator
from mt_cli.export.huggingface import export_huggingface
from mt_cli.export.runs import ctranslate2_model_dir
from mt_cli.pretrained.importing import import_model
from mt_cli.runtime.precision import ComputeType
from mt_cli.train.run import train
from mt_cli.train.warm_start import parent_sections
from mt_cli.trained import TrainedModel, load_trained

TEST2016 = multi30k("test_2016_flickr", "de")


def texts(engine: Translator | CTranslate2Engine, lines: list[str], beam: int) -> list[str]:
    return [t.text for t in engine.translate(lines, TranslateOptions(beam=beam, length_penalty=1.0))]


@pytest.fixture(scope="module")
def round_tripped(trained: TrainedModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    exported = export_huggingface(trained, tmp_path_factory.mktemp("hf") / "model")
    run = tmp_path_factory.mktemp("imported") / "run"
    import_model(str(exported), run)
    return run


@pytest.fixture
def one_thread(trained_run: Path) -> Iterator[None]:
    """Decoding on one thread: the tiny model's matmuls gain nothing from a second, and on a busy
    2-core machine the threads' synchronisation makes decoding several times slower. Not for the
    fine-tuning test, whose first validation loss must equal the parent's to the bit (as it was
    computed: after the shared run is trained, on the threads it was trained with)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("beam", [1, 5])
def test_export_then_import_translates_line_identically(
    fp32: Translator, round_tripped: Path, beam: int
) -> None:
    back = Translator.of(load_trained(round_tripped), "cpu", ComputeType.FLOAT32)
    # An imported model writes what MarianTokenizer writes: the text stripped (the original ends a
    # few lines on a lone word boundary, a trailing space).
    assert texts(back, TEST2016, beam) == [text.strip() for text in texts(fp32, TEST2016, beam)]


def assert_ctranslate2_equals_mt(run: Path, lines: list[str]) -> None:
    """The run's CTranslate2 export against mt fp32, greedy and beam 5."""
    ours = Translator.of(load_trained(run), "cpu", ComputeType.FLOAT32)
    engine = CTranslate2Engine(ctranslate2_model_dir(run, None), compute_type="float32")
    for beam in (1, 5):
        options = TranslateOptions(beam=beam, length_penalty=1.0)
        assert_ctranslate2_searches_agree(ours, engine, lines, options)


@pytest.mark.usefixtures("one_thread")
def test_the_ctranslate2_export_of_an_import_equals_mt_fp32(round_tripped: Path) -> None:
    assert_ctranslate2_equals_mt(round_tripped, TEST2016[:300])


def events(run: Path, kind: str) -> list[dict]:
    rows = map(json.loads, (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines())
    return [row for row in rows if row["event"] == kind]


def test_a_fine_tuned_import_starts_at_its_score_improves_and_exports_equal(
    trained_run: Path, round_tripped: Path, tmp_path: Path
) -> None:
    recipe = fine_tune_recipe(tmp_path / "finetune.yaml", pairs=3000, steps=60, validate_every=30)
    # No model or tokenizer section: a warm start takes its parent's. train.amp as the parent's
    # (auto), so that update 0 scores in the precision the parent's own validation did.
    cfg = load_config(recipe, [f"train.init_from={round_tripped}"], parent_sections)
    assert cfg.tokenizer.imported and cfg.model == load_trained(round_tripped).card.model
    child = tmp_path / "child"
    train(cfg, child, resume=False, log=quiet)
    original = [row for row in events(trained_run, "val") if row["best"]][-1]  # the exported weights
    val = events(child, "val")
    assert val[0]["step"] == 0 and val[0]["loss"] == original["loss"]
    assert val[-1]["step"] == 60 and val[-1]["loss"] < val[0]["loss"]
    assert_ctranslate2_equals_mt(child, TEST2016[:200])
    assert (child / "spm.de.vocab.json").read_bytes() == (round_tripped / "spm.de.vocab.json").read_bytes()
