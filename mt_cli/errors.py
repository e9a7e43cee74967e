"""Errors a person can fix, each with the exit code the CLI ends with.

The CLI prints any ``MtError`` as one line on stderr (``error: ...``) and exits with the
class's ``exit_code``; the table of codes is in README.md. A traceback means a bug in mt.
"""

from typing import ClassVar

EXIT_USAGE = 2  # a mistake in the command, its config or its input: fix it and run again
EXIT_FAILURE = 3  # the command was right but the work could not be done (e.g. training diverged)
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM; training saved last.pt first


class MtError(Exception):
    """Base class: the message says what is wrong and what to do."""

    exit_code: ClassVar[int] = EXIT_USAGE


class ConfigError(MtError):
    """A missing, unknown, mistyped or inconsistent configuration key."""


class DataError(MtError):
    """A corpus that cannot be found or read, or files that do not pair up."""


class CheckpointError(MtError):
    """A missing, truncated or incompatible checkpoint or run directory."""


class InputError(MtError):
    """Input text or files that cannot be used (missing, not UTF-8, ...)."""


class RunFailure(MtError):
    """The work itself failed although the command was valid (training diverged, a disk filled up)."""

    exit_code: ClassVar[int] = EXIT_FAILURE


class TrainingError(RunFailure):
    """Training cannot go on (e.g. the loss stayed non-finite)."""


def require(ok: bool, message: str) -> None:
    """A ``ConfigError`` with ``message`` unless ``ok``: how the rules of a recipe read."""
    if not ok:
        raise ConfigError(message)
