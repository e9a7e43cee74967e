"""Where the pairs of a ``source: backtranslation`` corpus are kept, and reading them back.

Such a corpus is text on one side (``side``: its target for back-translation, Sennrich et al.
2016; its source for forward translation, i.e. self-training) and another run's translation of it
on the other. The translating is done above this layer (``train.backtranslation``: whoever can
decode); this module only says where the result goes and reads it like a pair of text files.

A synthetic corpus lives in ``CACHE/<key>/`` (CACHE: the entry's ``cache_dir``, or ``synthetic/``
in the translating run's directory), where the key hashes everything the translations depend on:
the checkpoint's bytes (SHA-256), the text files' bytes, ``train_limit`` and the decoding (the
entry's ``TranslateOptions``, as ``dataclasses.asdict`` spells them; None: the run's own). Any
run that asks for the same translations reuses it. The directory holds::

    text.txt          the text as read, one line per line (the first train_limit lines)
    translation.txt   line i: the run's translation of line i of text.txt
    provenance.json   run, checkpoint and its SHA-256, direction, text files, decoding (the
                      options resolved with the run's defaults, sampling seed included), lines,
                      seconds, when, mt version (the prepared corpus's manifest repeats it)

It is built under a temporary name and renamed when whole, so one that exists is complete.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mt_cli.config.options import DEFAULT_OPTIONS, TranslateOptions
from mt_cli.config.sections import CorpusConfig
from mt_cli.disk.files import file_sha256, json_digest
from mt_cli.disk.layout import RunDir, run_and_checkpoint
from mt_cli.disk.reading import check_readable_file
from mt_cli.errors import DataError

# Bump when the layout or the meaning of a key changes: older caches are then remade. 2: the
# decoding is asdict(TranslateOptions) (1 spelled the entry's flat keys).
FORMAT = 2
TEXT, TRANSLATION, PROVENANCE = "text.txt", "translation.txt", "provenance.json"


@dataclass(frozen=True)
class Synthetic:
    """A ``source: backtranslation`` entry resolved: its run, checkpoint, text and cache folder."""

    run: Path
    checkpoint: Path
    checkpoint_sha256: str
    text: tuple[Path, ...]
    text_sha256: tuple[str, ...]
    languages: tuple[str, str]  # (the text's language, the language it is translated into)
    options: TranslateOptions  # as the entry asks, not yet resolved with the run's defaults
    train_limit: int | None
    side: str  # which side of the pairs the text is: target (back-translation) or source
    key: str = ""
    directory: Path = Path()  # CACHE/<key>: present when the translations are made

    def key_inputs(self) -> dict[str, Any]:
        """What the translations depend on (hashed into the folder name)."""
        return {
            "format": FORMAT,
            "checkpoint_sha256": self.checkpoint_sha256,
            "text_sha256": list(self.text_sha256),
            "languages": list(self.languages),
            "decoding": dataclasses.asdict(self.options),
            "train_limit": self.train_limit,
        }

    def exists(self) -> bool:
        return self.directory.is_dir()

    def provenance(self) -> dict[str, Any]:
        """provenance.json of the made translations (DataError if they are not made or damaged)."""
        path = self.directory / PROVENANCE
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(
                f"the synthetic pairs {self.directory} are not made yet (`mt prepare` makes them)"
            ) from None
        except (OSError, ValueError) as err:
            raise DataError(f"{path} is unreadable ({err}); delete {self.directory} and run again") from None

    def files(self) -> tuple[Path, Path]:
        """(source file, target file) of the pairs: the translation is the source of back-translation."""
        text, translation = self.directory / TEXT, self.directory / TRANSLATION
        return (translation, text) if self.side == "target" else (text, translation)


def options_of(entry: CorpusConfig) -> TranslateOptions:
    """The options an entry's text is translated with: its ``decode`` block (None: the run's own
    beam search), into the entry's other language, without scores (nobody reads them)."""
    decode = DEFAULT_OPTIONS if entry.decode is None else entry.decode
    return dataclasses.replace(decode, scores=False, tgt_lang=text_languages(entry)[1])


def text_languages(entry: CorpusConfig) -> tuple[str, str]:
    """(language of the entry's text, language it is translated into)."""
    pair = (entry.tgt_lang, entry.src_lang) if entry.side == "target" else (entry.src_lang, entry.tgt_lang)
    if pair[0] is None or pair[1] is None:
        raise ValueError("an entry of data.entries() has both languages")
    return pair[0], pair[1]


def resolve(entry: CorpusConfig) -> Synthetic:
    """The run, checkpoint, text files and cache folder of a ``source: backtranslation`` entry:
    CheckpointError if the run or its checkpoint is missing, DataError if a text file is."""
    if entry.run is None:
        raise ValueError("rules.check_data requires run for source=backtranslation")
    root, name = run_and_checkpoint(entry.run)
    run = RunDir(root).existing()
    checkpoint = run.find_checkpoint(name)
    text = tuple(Path(path) for path in entry.text)
    for path in text:
        check_readable_file(path)
    synthetic = Synthetic(
        run=root,
        checkpoint=checkpoint,
        checkpoint_sha256=sha256(checkpoint),
        text=text,
        text_sha256=tuple(map(sha256, text)),
        languages=text_languages(entry),
        options=options_of(entry),
        train_limit=entry.train_limit,
        side=entry.side,
    )
    cache = Path(entry.cache_dir) if entry.cache_dir is not None else run.synthetic
    key = json_digest(synthetic.key_inputs())
    return dataclasses.replace(synthetic, key=key, directory=cache / key)


def fingerprint(entry: CorpusConfig) -> dict[str, Any]:
    """What identifies the pairs (``corpus.train_fingerprint``): the key of the translations, and
    which side the text is on. Where the cache is does not matter."""
    return {"synthetic": resolve(entry).key, "side": entry.side, "train_limit": entry.train_limit}


def sha256(path: Path) -> str:
    """``file_sha256``, computed once per file version: a corpus is fingerprinted several times."""
    stat = path.stat()
    return _sha256_of(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    return file_sha256(Path(path))
