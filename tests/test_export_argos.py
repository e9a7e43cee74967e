"""The Argos Translate package: real Argos installs it and translates offline as mt does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mt_cli.config.options import TranslateOptions
from mt_cli.decode.ctranslate2 import CTranslate2Engine
from mt_cli.decode.hypotheses import output_limit
from mt_cli.decode.translator import Translator
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.errors import ConfigError, InputError
from mt_cli.export.argos import export_argos, package_file
from mt_cli.export.ctranslate2 import Quantization
from mt_cli.trained import TrainedModel, load_trained

pytest.importorskip("ctranslate2")
pytest.importorskip("onnx")
pytest.importorskip("argostranslate")

PACKAGE_DIR = "translate-de_en-mt"
ARGOS_BEAM, ARGOS_LENGTH_PENALTY = 4, 0.2  # Argos's defaults (ARGOS_BEAM_SIZE; fixed)

# Run in a child process: argostranslate reads its settings and makes its directories when
# imported. Sockets are disabled there, so a download (MiniSBD's model, Argos's index) fails.
ARGOS = """
import json, socket, sys

def offline(*args, **kwargs):
    raise OSError("network access during the Argos test")

socket.socket.connect = socket.create_connection = offline

import argostranslate.package, argostranslate.translate
from minisbd import models

request = json.load(sys.stdin)
argostranslate.package.install_from_path(request["package"])
translation = argostranslate.translate.get_translation_from_codes("de", "en")
sentencizer = translation.underlying.sentencizer
json.dump({
    "translations": [argostranslate.translate.translate(q, "de", "en") for q in request["texts"]],
    "sentences": [sentencizer.split_sentences(q) for q in request["texts"]],
    "sbd_model": sentencizer.lang,
    "minisbd_cache": models.cache_dir,
}, sys.stdout)
"""


@pytest.fixture(scope="module")
def package(trained: TrainedModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_argos(trained, tmp_path_factory.mktemp("argos") / "de-en", Quantization.FLOAT32)


@pytest.fixture(scope="module")
def lines() -> list[str]:
    return read_lines(SHIPPED_MULTI30K / "test_2016_flickr.de.gz")[:20]


@pytest.fixture(scope="module")
def argos(package: Path, lines: list[str], tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Argos's answers for the lines and, last, the first two lines as one text."""
    home = tmp_path_factory.mktemp("argos-home")
    return {**run_argos(package, [*lines, f"{lines[0]} {lines[1]}"], home), "home": home}


def installed_model(argos: dict) -> Path:
    return argos["home"] / "packages" / PACKAGE_DIR / "model"


def run_argos(package: Path, texts: list[str], home: Path) -> dict:
    """Install ``package`` into a fresh Argos under ``home`` and translate ``texts`` de -> en."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ARGOS_", "XDG_"))}
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_CACHE_HOME=str(home / "cache"),
        ARGOS_PACKAGES_DIR=str(home / "packages"),
        ARGOS_BEAM_SIZE=str(ARGOS_BEAM),
        ARGOS_DEVICE_TYPE="cpu",
        # One thread, as the engines below: CTranslate2's threads spin while they wait, and a
        # second process doing the same on a busy machine makes both many times slower.
        ARGOS_INTRA_THREADS="1",
    )
    request = json.dumps({"package": str(package), "texts": texts})
    done = subprocess.run(
        [sys.executable, "-c", ARGOS], input=request, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_argos_uses_the_packaged_sentence_splitter_offline(argos: dict, lines: list[str]) -> None:
    assert Path(argos["sbd_model"]) == installed_model(argos).parent / "minisbd" / "de.onnx"
    assert not Path(argos["minisbd_cache"]).exists()  # MiniSBD downloaded nothing
    assert argos["sentences"] == [[line] for line in lines] + [[lines[0], lines[1]]]


def test_argos_translates_as_mt(fp32: Translator, argos: dict, lines: list[str]) -> None:
    # mt's translations (the installed model is a complete mt export) with Argos's beam and
    # length penalty, on the lines that ended before mt's length limit (Argos has none).
    engine = CTranslate2Engine(installed_model(argos), threads=1)
    expected = engine.translate_lines(
        lines, TranslateOptions(beam=ARGOS_BEAM, length_penalty=ARGOS_LENGTH_PENALTY)
    )
    hyps = fp32.translate(lines, TranslateOptions(beam=ARGOS_BEAM, length_penalty=ARGOS_LENGTH_PENALTY))
    dec, positions = fp32.card.decode, fp32.card.model.max_positions
    limits = [
        output_limit(len(ids), dec.max_len_a, dec.max_len_b, positions)
        for ids in fp32.encode_sources(lines, warn=lambda message: None)
    ]
    ended = [
        i
        for i, (hyp, limit) in enumerate(zip(hyps, limits))
        # Argos copies a source piece for <unk>
        if len(hyp.best.tokens) < limit - 1 and "⁇" not in expected[i]
    ]
    assert len(ended) >= 12
    translations = argos["translations"]
    assert [translations[i] for i in ended] == [expected[i] for i in ended]
    # Two sentences are translated one by one and joined with a space.
    assert translations[-1] == f"{translations[0]} {translations[1]}"


def test_every_line_is_mt_s_text_of_ctranslate2_s_output_with_argos_s_arguments(
    argos: dict, lines: list[str]
) -> None:
    # Also the lines that ran past mt's limit: the package's sentencepiece.model (the source
    # model) decodes target pieces as mt's target model does.
    import ctranslate2

    engine = CTranslate2Engine(installed_model(argos), threads=1)
    model = ctranslate2.Translator(str(installed_model(argos)), intra_threads=1)
    for line, translation in zip(lines, argos["translations"]):
        (result,) = model.translate_batch(
            [engine.src_tok.pieces(line)],  # as apply_packaged_translation calls it
            replace_unknowns=True,
            max_batch_size=32,
            batch_type="tokens",
            beam_size=ARGOS_BEAM,
            num_hypotheses=1,
            length_penalty=ARGOS_LENGTH_PENALTY,
            return_scores=True,
        )
        ids = engine.tgt_tok.to_ids(result.hypotheses[0])
        (text,) = engine.tgt_tok.decode([ids])
        if "⁇" not in text:
            assert translation == text


def test_the_package_holds_one_directory_and_is_reproducible(
    trained: TrainedModel, package: Path, tmp_path: Path
) -> None:
    assert package.name == "de-en.argosmodel"
    with zipfile.ZipFile(package) as archive:
        names = set(archive.namelist())
        metadata = json.loads(archive.read(f"{PACKAGE_DIR}/metadata.json"))
        sentencepiece = archive.read(f"{PACKAGE_DIR}/sentencepiece.model")
    model = {"config.json", "model.bin", "mt.json", "source.spm", "target.spm"}
    vocabularies = {"source_vocabulary.json", "target_vocabulary.json"}
    files = {"metadata.json", "README.md", "sentencepiece.model", "minisbd/de.onnx"}
    files |= {f"model/{name}" for name in model | vocabularies}
    assert names == {f"{PACKAGE_DIR}/{name}" for name in files}
    assert metadata["from_code"] == "de" and metadata["to_code"] == "en" and metadata["type"] == "translate"
    assert (metadata["from_name"], metadata["to_name"]) == ("German", "English")
    assert sentencepiece == trained.src_tok.model_bytes()
    again = export_argos(trained, tmp_path / "again.argosmodel", Quantization.FLOAT32)
    assert again.read_bytes() == package.read_bytes()


def test_an_existing_package_is_refused_untouched(trained: TrainedModel, tmp_path: Path) -> None:
    existing = tmp_path / "model.argosmodel"
    existing.write_bytes(b"keep")
    for target in (existing, tmp_path / "model"):  # the suffix is appended before the check
        assert package_file(target) == existing
        with pytest.raises(InputError, match="already exists"):
            export_argos(trained, target, Quantization.INT8)
    assert existing.read_bytes() == b"keep"
    assert list(tmp_path.iterdir()) == [existing]  # no staging left behind


def test_a_failed_export_leaves_nothing(
    trained: TrainedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(lang: str) -> bytes:
        raise RuntimeError("interrupted")

    monkeypatch.setattr("mt_cli.export.argos.sentence_splitter", broken)  # after the model is written
    with pytest.raises(RuntimeError, match="interrupted"):
        export_argos(trained, tmp_path / "model", Quantization.FLOAT32)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        pytest.param(
            "Ein Hund läuft. Eine Katze schläft!", ["Ein Hund läuft.", "Eine Katze schläft!"], id="two"
        ),
        pytest.param(
            "  Wer? Ich…  Er sagte: „Komm!“ Dann", ["Wer?", "Ich…", "Er sagte: „Komm!“", "Dann"], id="marks"
        ),
        pytest.param(
            "Am 3. Mai, z. B. bei E.S.E. Electronics.",
            ["Am 3. Mai, z. B. bei E.S.E. Electronics."],
            id="initials",
        ),
        pytest.param(
            "Er wartete... Dann 3.5 km auf www.example.com. Ja",
            ["Er wartete...", "Dann 3.5 km auf www.example.com.", "Ja"],
            id="periods",
        ),
        pytest.param("", [], id="empty"),
        # Over MiniSBD's 1000 characters, which it predicts in chunks.
        pytest.param("Hund. " * 300, ["Hund."] * 300, id="long"),
        pytest.param("Hund " * 300 + "läuft.", ["Hund " * 300 + "läuft."], id="long-sentence"),
    ],
)
def test_the_sentence_splitter_runs_in_minisbd(text: str, sentences: list[str], tmp_path: Path) -> None:
    from minisbd import SBDetect

    from mt_cli.export.sentences import sentence_splitter

    model = tmp_path / "de.onnx"
    model.write_bytes(sentence_splitter("de"))
    assert SBDetect(str(model), use_gpu=False).sentences(text) == sentences


def test_a_model_with_target_tags_is_refused_in_one_line(many_to_english: Path, tmp_path: Path) -> None:
    tagged = load_trained(many_to_english)  # <2en> before every source
    with pytest.raises(ConfigError, match=r"cannot tell this model which language to write \(.*<2en>") as err:
        export_argos(tagged, tmp_path / "model", Quantization.FLOAT32)
    assert "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []
