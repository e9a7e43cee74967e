"""``Settings``: what ``mt serve``'s options set, and the one home of their defaults (the command
line reads them from here). Free of fastapi, so that ``mt --help`` need not load it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mt_cli.config.options import TranslateOptions
from mt_cli.serve.keys import KeyLimits, largest_char_limit


@dataclass(frozen=True)
class Settings:
    """What ``mt serve``'s options set; the defaults are the command's (docs/reference.md says why)."""

    max_chars: int = 5000  # characters of one request's q, all texts together
    max_queue: int = 1024  # distinct sentences waiting for a decoder; more is a 429
    max_queue_pieces: int = 32768  # their source pieces (SentencePiece's); more is a 429
    max_request_lines: int | None = None  # lines of one request (400 past it); None: half the queue
    batch_pieces: int = 4096  # source pieces a free decoder takes at most in one batch
    queue_timeout: float = 30.0  # seconds a request may wait for decoding; then a 503, not decoded
    cache_size: int = 10000  # sentences whose translations are kept (LRU); 0: no cache
    # How every request decodes (--beam, --length-penalty; None: the model card's), its target
    # and alternatives set per request (``request.TranslateRequest.options``).
    options: TranslateOptions = TranslateOptions(scores=False)
    alternatives_limit: int = 3  # alternatives a request may ask for (400 past it); 0: none
    # Each key with its own limits (``keys.py``, the --api-keys file); empty: no key needed.
    api_keys: Mapping[str, KeyLimits] = field(default_factory=dict)
    req_limit: int = 0  # requests a minute per client (its key, else its address); 0: no limit
    metrics: bool = False  # GET /metrics: Prometheus's text format (LibreTranslate's --metrics)
    metrics_auth_token: str | None = None  # /metrics needs "Authorization: Bearer <it>"; None: open
    timeout_read: float = 10.0  # seconds for a request's headers, and again for its body
    timeout_keep_alive: float = 5.0  # seconds an idle connection is kept open (uvicorn's default)
    timeout_graceful_shutdown: float = 8.0  # seconds from SIGTERM to exit (under Docker's 10 s)
    limit_concurrency: int | None = None  # requests handled at once (503 past it); None: no limit
    suggestions: Path | None = None  # the database /suggest writes (--suggestions); None: a 403
    max_file_size: int = 1 << 20  # bytes of a file /translate_file takes (413 past it); 0: files off
    file_ttl: float = 1800.0  # seconds a translated file waits for its download (LibreTranslate's)

    @property
    def max_body(self) -> int:
        """Bytes of a request body: 12 per character (a 4-byte character %-encoded in a form is
        12 bytes, escaped in JSON as a surrogate pair also 12) plus 16 KiB for the other fields;
        of the most characters any key may send, since the key is in the body."""
        return 12 * largest_char_limit(self.api_keys, self.max_chars) + (16 << 10)

    @property
    def request_lines(self) -> int:
        """The most lines one request may send: at most the queue, by default half of it, so one
        request can never hold the whole queue and starve every other client."""
        if self.max_request_lines is not None:
            return min(self.max_request_lines, self.max_queue)
        return max(1, self.max_queue // 2)


DEFAULT_SETTINGS = Settings()
