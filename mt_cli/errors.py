"""Errors a person can fix. The CLI prints each as one line on stderr and exits with code 2."""


class MtError(Exception):
    """Base class: the message says what is wrong and what to do."""


class ConfigError(MtError):
    """A missing, unknown, mistyped or inconsistent configuration key."""


class DataError(MtError):
    """A corpus that cannot be found or read, or files that do not pair up."""


class CheckpointError(MtError):
    """A missing, truncated or incompatible checkpoint or run directory."""


class InputError(MtError):
    """Input text or files that cannot be used (missing, not UTF-8, ...)."""
