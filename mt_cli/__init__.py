"""mt: train, run and score a Transformer for German-English translation.

The package has one wing per stage, and imports go one way, downwards (checked in CI by
import-linter, the contracts in pyproject.toml):

    cli                      the Typer commands: parse arguments, call one function, print
    api                      the Python API the commands call: load, Model and the result types
    tools                    mt bench, the textbook baseline, plots: beside the core, never imported by it
    train | serve | export   the run around the loop | the LibreTranslate HTTP API | other engines' formats
    documents                text and HTML as sentences to translate, put back together around them
    pretrained               published checkpoints (Hugging Face Marian) as mt's own model
    decode                   search, the translator (lines in, lines out), sacreBLEU scoring
    trained                  a trained model as every consumer loads it: card, tokenizers, weights
    model | data             the network and its loss | corpus -> encoded pairs -> batches
    text | checkpoint        the SentencePiece models | the typed checkpoint: saving, loading, averaging
    config | runtime         the recipe, its rules and a model's card | device, precision, DDP
    disk                     the run directory's names, atomic writes, reading text, the run lock
    specials | errors | version
                             token ids and pieces | errors a person can fix | mt's version

Beyond the layers, each wing's docstring says what it imports ("imports only ...", "never
imports ..."), and each such sentence is a contract of its own in pyproject.toml, named after it.
Among them: ``model`` never imports ``text``, ``data`` or sentencepiece (it sees ids only),
``data`` never imports ``runtime.distributed`` (whoever runs several processes calls data, not
the other way round), ``documents`` never imports ``decode``, ``model``, ``text`` or torch (it
cuts documents into sentences; its callers translate them), and only ``cli`` imports ``tools``.
Inference reads a model's card, never its training recipe. Heavy imports (datasets,
matplotlib) happen inside the functions that need them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mt_cli.version import __version__

# The public API (docs/api.md): these names are a promise; everything else is private by
# convention. They load on first use (PEP 562), so `import mt_cli` and `mt --help` stay fast
# and never import torch.
_PUBLIC = {
    "load": "mt_cli.api",
    "Model": "mt_cli.api",
    "Translation": "mt_cli.decode.results",
    "Hypothesis": "mt_cli.decode.results",
    "Score": "mt_cli.decode.results",
    "Alignment": "mt_cli.decode.results",
    "TranslateOptions": "mt_cli.config.options",
    "Sampling": "mt_cli.config.options",
    "EngineKind": "mt_cli.decode.engine",
    "ComputeType": "mt_cli.runtime.precision",
    "MtError": "mt_cli.errors",
    "InputError": "mt_cli.errors",
    "CheckpointError": "mt_cli.errors",
    "RunFailure": "mt_cli.errors",
}

__all__ = [
    "__version__",
    "load",
    "Model",
    "Translation",
    "Hypothesis",
    "Score",
    "Alignment",
    "TranslateOptions",
    "Sampling",
    "EngineKind",
    "ComputeType",
    "MtError",
    "InputError",
    "CheckpointError",
    "RunFailure",
]

if TYPE_CHECKING:
    from mt_cli.api import Model, load
    from mt_cli.config.options import Sampling, TranslateOptions
    from mt_cli.decode.engine import EngineKind
    from mt_cli.decode.results import Alignment, Hypothesis, Score, Translation
    from mt_cli.errors import CheckpointError, InputError, MtError, RunFailure
    from mt_cli.runtime.precision import ComputeType


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'mt_cli' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # the next lookup finds it without coming here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
