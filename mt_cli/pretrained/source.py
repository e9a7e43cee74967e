"""Where a published model comes from: a local directory saved by transformers, or a hub id.

``hf:OWNER/NAME`` (optionally ``@REVISION``) is fetched with ``huggingface_hub`` into its cache
(``HF_HOME``), only the files an import reads, every request under a time limit (the hub's
``HF_HUB_ETAG_TIMEOUT`` and ``HF_HUB_DOWNLOAD_TIMEOUT``, 10 s unless set); ``HF_HUB_OFFLINE=1``
takes it from the cache alone. Without a network, or with a hub that does not answer in time (or
offline), and nothing cached, it is one line and exit 3: the command was right, the machine could
not do it. Anything else is a directory.
"""

from __future__ import annotations

import json
import sys
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
    """The files of ``hf:OWNER/NAME[@REVISION]``: the revision resolved and each file fetched with a
    time limit (the hub's HF_HUB_ETAG_TIMEOUT, HF_HUB_DOWNLOAD_TIMEOUT: 10 s each unless set), or,
    when the hub cannot be reached or does not answer in time, what its cache holds."""
    from huggingface_hub.errors import HFValidationError, RepositoryNotFoundError, RevisionNotFoundError

    repo, _, revision = spec.removeprefix(HUB_PREFIX).partition("@")
    if not repo:
        raise ConfigError(f"{spec} names no model; write hf:OWNER/NAME, e.g. hf:Helsinki-NLP/opus-mt-de-en")
    try:
        commit, names = _listing(repo, revision or None)
    except (RepositoryNotFoundError, RevisionNotFoundError, HFValidationError) as err:
        raise ConfigError(f"{spec}: {_said(err)}") from None
    except (OSError, *_transport_errors()) as err:  # offline, refused, timed out, the hub failing (5xx)
        cached = _cached(spec, repo, revision or None, err)  # HF_HOME/hub/models--O--N/snapshots/COMMIT
        return Located(cached, f"{HUB_PREFIX}{repo}", cached.name)
    return Located(_download(spec, repo, commit, names), f"{HUB_PREFIX}{repo}", commit)


def _listing(repo: str, revision: str | None) -> tuple[str, list[str]]:
    """(the commit ``revision`` names, the names of the files an import reads); the request is
    given the hub's time limit, which ``snapshot_download``'s first request lacks."""
    from fnmatch import fnmatch

    from huggingface_hub import HfApi, constants

    api = HfApi()
    try:
        info = api.model_info(repo, revision=revision, timeout=constants.HF_HUB_ETAG_TIMEOUT)
    except (KeyError, TypeError, json.JSONDecodeError) as err:  # HF_ENDPOINT names another kind of server
        raise RunFailure(
            f"cannot fetch hf:{repo}: {api.endpoint} did not answer as the Hugging Face hub "
            f"does ({_said(err)}); check HF_ENDPOINT"
        ) from None
    names = [
        sibling.rfilename
        for sibling in info.siblings or ()
        if "/" not in sibling.rfilename and any(fnmatch(sibling.rfilename, pattern) for pattern in _FILES)
    ]
    if info.sha is None or "config.json" not in names:
        raise ConfigError(f"hf:{repo} has no config.json; it is not a model transformers saved")
    return info.sha, names


def _download(spec: str, repo: str, commit: str, names: list[str]) -> Path:
    """The directory (HF_HOME/hub/models--OWNER--NAME/snapshots/COMMIT) holding ``names`` once fetched."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    try:
        paths = [Path(hf_hub_download(repo, name, revision=commit)) for name in names]
    except (
        OSError,
        EntryNotFoundError,
        *_transport_errors(),
    ) as err:  # the hub stopped answering, a full disk
        raise RunFailure(f"cannot fetch {spec}: {_said(err)}") from None
    return paths[0].parent


def _cached(spec: str, repo: str, revision: str | None, why: BaseException) -> Path:
    """The cache's copy of ``repo`` at ``revision``, the hub being out of reach (``why``)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo, revision=revision, allow_patterns=_FILES, local_files_only=True))
    except LocalEntryNotFoundError:
        raise RunFailure(
            f"cannot fetch {spec}: the Hugging Face hub is unreachable ({_said(why)}; no network, a hub "
            "that does not answer, or HF_HUB_OFFLINE=1) and it is not in the local cache; run where the "
            "hub is reachable, or import a directory"
        ) from None


def _transport_errors() -> tuple[type[Exception], ...]:
    """The errors of the hub client's HTTP library for a hub that refuses, drops or does not answer
    a request: httpx2's (huggingface_hub 2) or httpx's (1); requests' (0.x) are OSErrors."""
    return tuple(
        module.TransportError for name in ("httpx2", "httpx") if (module := sys.modules.get(name)) is not None
    )


def _said(err: BaseException) -> str:
    """The error's kind and its message's first line."""
    first = next(iter(str(err).splitlines()), "")
    return f"{type(err).__name__}: {first}" if first else type(err).__name__
