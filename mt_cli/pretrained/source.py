"""Where a published model comes from: a local directory saved by transformers, or a hub id.

``hf:OWNER/NAME`` (optionally ``@REVISION``) is fetched with ``huggingface_hub`` into its cache
(``HF_HOME``), only the files an import reads; ``HF_HUB_OFFLINE=1`` takes it from the cache alone.
Without a network (or offline, with nothing cached) it is one line and exit 3: the command was
right, the machine could not do it. Anything else is a directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mt_cli.errors import ConfigError, InputError, RunFailure

HUB_PREFIX = "hf:"
# What an import reads; the hub repositories of OPUS-MT also hold TensorFlow and Flax weights.
_FILES = ["config.json", "generation_config.json", "tokenizer_config.json", "*.spm", "vocab.json",
          "target_vocab.json", "model.safetensors", "pytorch_model.bin"]  # fmt: skip


@dataclass(frozen=True)
class Located:
    """A model's files on this machine and how to name where they came from."""

    directory: Path
    name: str  # hf:OWNER/NAME or the directory, as the user gave it
    revision: str | None  # the hub commit the files are from; None for a directory


def is_import_source(spec: str) -> bool:
    """Whether ``spec`` names a published model (a hub id, or a directory with a config.json)
    rather than an mt run (which has no config.json; its recipe is config.yaml)."""
    return spec.startswith(HUB_PREFIX) or (Path(spec) / "config.json").is_file()


def locate(spec: str) -> Located:
    """The local files of ``spec``: a hub id fetched (or found in the cache), or a directory."""
    _check_extra()
    if spec.startswith(HUB_PREFIX):
        return _fetch(spec)
    directory = Path(spec)
    if not directory.exists():
        raise InputError(f"{directory} does not exist; give a model directory or hf:OWNER/NAME")
    if not directory.is_dir():
        raise InputError(f"{directory} is a file; give the directory transformers saved the model in")
    return Located(directory, spec, None)


def _check_extra() -> None:
    """A missing extra is one line before any work, not an ImportError halfway."""
    try:
        import huggingface_hub  # noqa: F401
        import safetensors  # noqa: F401
    except ImportError:
        raise ConfigError(
            'importing a published model needs the pretrained extra: pip install -e ".[pretrained]"'
        ) from None


def _fetch(spec: str) -> Located:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    repo, _, revision = spec.removeprefix(HUB_PREFIX).partition("@")
    if not repo:
        raise ConfigError(f"{spec} names no model; write hf:OWNER/NAME, e.g. hf:Helsinki-NLP/opus-mt-de-en")
    try:
        path = Path(snapshot_download(repo, revision=revision or None, allow_patterns=_FILES))
    except (RepositoryNotFoundError, RevisionNotFoundError, HFValidationError) as err:
        raise ConfigError(f"{spec}: {str(err).splitlines()[0]}") from None
    except LocalEntryNotFoundError:
        raise RunFailure(
            f"cannot fetch {spec}: the Hugging Face hub is unreachable (no network, or HF_HUB_OFFLINE=1) "
            "and it is not in the local cache; run where the hub is reachable, or import a directory"
        ) from None
    except OSError as err:
        raise RunFailure(f"cannot fetch {spec}: {str(err).splitlines()[0]}") from None
    # snapshot_download answers HF_HOME/hub/models--OWNER--NAME/snapshots/COMMIT.
    return Located(path, f"{HUB_PREFIX}{repo}", path.name)
