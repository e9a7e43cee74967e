"""``mt export --format argos``: a run's model as an Argos Translate package (``.argosmodel``), which
Argos Translate and LibreTranslate install and run offline.

The package is a zip of one directory, ``translate-SRC_TGT-mt``, holding:

* ``model/``: the CTranslate2 export (``export.ctranslate2``), which already decodes as mt does
  for a client that knows nothing of mt: it appends EOS to sources itself, and its position
  table covers Argos's output cap of 256 tokens. It is a complete mt export too:
  ``decode.ctranslate2.CTranslate2Engine`` opens it.
* ``sentencepiece.model``: Argos has one SentencePiece model, which encodes the source and
  decodes the target pieces CTranslate2 returns. mt's source model is the one that must encode;
  decoding joins pieces by their surface, "▁" as a space, whatever the model, so the target
  pieces decode to mt's text (checked on Multi30k's references) except in two cases: an unknown
  word (Argos has CTranslate2 copy a source piece in place of ``<unk>``, mt prints " ⁇ ") and
  "_", which Argos turns into a space.
* ``minisbd/SRC.onnx``: Argos splits text into sentences with MiniSBD, which downloads a model
  from GitHub unless the package carries one; ``export.sentences`` builds a rule-based one.
* ``metadata.json`` (languages, for Argos's package list) and ``README.md``.

What else differs from ``mt translate``: Argos decodes with its own settings, a beam of 4
(``ARGOS_BEAM_SIZE``), length penalty 0.2 and no output limit but CTranslate2's 256 tokens,
where mt caps each sentence at ``max_len_a * source length + max_len_b``; and it translates each
sentence on its own, joining the translations with spaces. Within those settings the
translations are mt's (float32: token for token).

The zip is reproducible: its members are sorted and dated 1980-01-01, so one checkpoint exported
twice gives the same bytes. A model trained with target-language tags (``<2en>`` before every
source) is refused: Argos would send its sources without the tag.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from mt_cli.disk.files import ZIP_EPOCH, atomic_write_bytes, temporary_directory_next_to, write_json
from mt_cli.errors import ConfigError, InputError
from mt_cli.export.ctranslate2 import export_ctranslate2
from mt_cli.export.quantization import Quantization
from mt_cli.export.sentences import sentence_splitter
from mt_cli.specials import target_tag
from mt_cli.version import __version__

if TYPE_CHECKING:
    from mt_cli.config.card import ModelCard
    from mt_cli.trained import TrainedModel

SUFFIX = ".argosmodel"
PACKAGE_VERSION = "1.0"
ARGOS_VERSION = "1.11"  # the first Argos Translate that runs a package's own minisbd/*.onnx
# Names for Argos's language lists; another language is listed by its code.
LANGUAGE_NAMES = {
    "cs": "Czech",
    "de": "German",
    "en": "English",
    "es": "Spanish",
    "fr": "French",
    "it": "Italian",
    "nl": "Dutch",
    "pt": "Portuguese",
    "ru": "Russian",
}


def package_file(target: Path) -> Path:
    """The file ``export_argos`` writes for ``target``: Argos's tools list ``*.argosmodel`` files,
    so the suffix is appended when ``target`` lacks it (``model.v2`` -> ``model.v2.argosmodel``)."""
    return target if target.suffix == SUFFIX else target.with_name(target.name + SUFFIX)


def export_argos(trained: TrainedModel, target: Path, quantization: Quantization) -> Path:
    """Write the trained model as an Argos Translate package and return its path
    (``package_file(target)``, which must not exist)."""
    path = package_file(target)
    if path.exists():
        raise InputError(f"{path} already exists; remove it or choose another --output")
    data = trained.card.data
    if data.uses_target_tags():  # Argos puts nothing before a source: every line would lack its tag
        raise ConfigError(
            "an Argos package cannot tell this model which language to write (it was trained with "
            f"{target_tag(data.tgt_lang)} before every source); export --format ctranslate2 and "
            "translate with `mt translate --engine ctranslate2 --tgt-lang ...`, which adds the tag"
        )
    with temporary_directory_next_to(path) as staging:
        write_package(trained, staging / package_name(trained.card), quantization)
        atomic_write_bytes(path, lambda handle: write_zip(staging, handle))
    return path


def package_name(card: ModelCard) -> str:
    """The directory Argos installs the package as: not an official package's name, so that
    installing it never mixes its files into one."""
    return f"translate-{card.data.src_lang}_{card.data.tgt_lang}-mt"


def write_package(trained: TrainedModel, root: Path, quantization: Quantization) -> None:
    """The package directory ``root`` (which must not exist), as the zip will hold it."""
    src = trained.card.data.src_lang
    root.mkdir()
    export_ctranslate2(trained, root / "model", quantization)
    (root / "sentencepiece.model").write_bytes(trained.src_tok.model_bytes())
    (root / "minisbd").mkdir()
    (root / "minisbd" / f"{src}.onnx").write_bytes(sentence_splitter(src))
    write_json(metadata(trained.card), root / "metadata.json")
    (root / "README.md").write_text(readme(trained, quantization), encoding="utf-8")


def metadata(card: ModelCard) -> dict[str, object]:
    src, tgt = card.data.src_lang, card.data.tgt_lang
    return {
        "package_version": PACKAGE_VERSION,
        "argos_version": ARGOS_VERSION,
        "type": "translate",
        "from_code": src,
        "from_name": LANGUAGE_NAMES.get(src, src),
        "to_code": tgt,
        "to_name": LANGUAGE_NAMES.get(tgt, tgt),
        "links": [],
    }


def write_zip(staging: Path, handle: BinaryIO) -> None:
    """Every file under ``staging``, named relative to it, in name order and with fixed dates."""
    with zipfile.ZipFile(handle, "w") as archive:
        for file in sorted(p for p in staging.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(file.relative_to(staging).as_posix(), ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16  # rw-r--r--, as Argos extracts it
            with file.open("rb") as source, archive.open(info, "w") as member:
                while block := source.read(1 << 20):
                    member.write(block)


def readme(trained: TrainedModel, quantization: Quantization) -> str:
    card = trained.card
    src, tgt = card.data.src_lang, card.data.tgt_lang
    dec, layers = card.decode, f"{card.model.encoder_layers}+{card.model.decoder_layers}"
    checkpoint = trained.checkpoint.name if trained.checkpoint is not None else "a checkpoint"
    corpus = "Multi30k" if card.data.source == "multi30k" else "its own corpus"
    return f"""# {LANGUAGE_NAMES.get(src, src)} → {LANGUAGE_NAMES.get(tgt, tgt)}, trained with mt

A {layers}-layer Transformer (d_model {card.model.d_model}) trained on {corpus} with mt {__version__},
exported from {checkpoint} with `mt export --format argos --quantization {quantization.value}`.

Install it with Argos Translate 1.11 or later (or LibreTranslate); it needs no network:

```python
import argostranslate.package, argostranslate.translate

argostranslate.package.install_from_path("path/to/this.argosmodel")
print(argostranslate.translate.translate("...", "{src}", "{tgt}"))
```

It installs as `{package_name(card)}`. Argos uses one package per language pair: remove any
other {src} → {tgt} package first.

## Differences from `mt translate`

* Decoding: Argos uses a beam of 4 (`ARGOS_BEAM_SIZE`), length penalty 0.2 and CTranslate2's
  cap of 256 tokens; mt uses beam {dec.beam_size}, length penalty {dec.length_penalty} and a cap of
  `floor({dec.max_len_a} * source pieces with </s>) + {dec.max_len_b}` tokens.
* Sentences: Argos translates each on its own. `minisbd/{src}.onnx` splits them by rule,
  after `.`, `!`, `?` or `…` (or a closing quote or bracket behind them) followed by a space,
  but not after an initial or a one-letter abbreviation (`z. B.`, `E.S.E.`, `3.`); other
  abbreviations (`Dr.`) do end a sentence.
* Text: `sentencepiece.model` is the {src} model, with which Argos also decodes {tgt}. That gives
  mt's text with two exceptions: for an unknown word mt writes ` ⁇ ` where Argos copies a
  source word, and Argos turns every `_` into a space.
"""
