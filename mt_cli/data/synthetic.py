"""Where the pairs of a translated corpus (``source: backtranslation`` or ``distillation``) are
kept, and reading them back.

Such a corpus is text on one side (``CorpusConfig.text_side``: its target for back-translation,
Sennrich et al. 2016; its source for forward translation: self-training, or sequence-level
distillation from a teacher, Kim and Rush 2016) and its translation on the other, by a teacher:
one run, or an ensemble of runs combined per step, in mt's engine or CTranslate2's. The
translating is done above this layer (``train.backtranslation``: whoever can decode); this
module says where the result goes and reads it like a pair of text files, less the pairs whose
translation scored under the entry's ``min_score``.

A synthetic corpus lives in ``CACHE/<key>/`` (CACHE: the entry's ``cache_dir``, or ``synthetic/``
in the teacher's first run), where the key hashes everything the translations depend on: every
teacher checkpoint's bytes (SHA-256), the engine, the text files' bytes, ``train_limit``, the
languages and the decoding (the entry's ``TranslateOptions``, as ``TranslateOptions.record`` spells
them; None: the run's own). Any run that asks for the same translations reuses it; a changed
teacher gets a new one. The directory holds::

    text.txt          the text as read, a line per pair (a line with an n-best list repeats)
    translation.txt   pair i's translation of line i of text.txt
    scores.txt        pair i's score: the teacher's mean log-probability per target piece, EOS
                      included (``decode.hypotheses.per_piece``), whatever the length penalty
    provenance.json   teacher runs, checkpoints and their SHA-256, engine, direction, text files,
                      decoding (the options resolved with the run's defaults), lines, pairs,
                      seconds, when, mt version (the prepared corpus's manifest repeats it)

It is built under a temporary name and renamed when whole, so one that exists is complete. Until
then the translation is kept chunk by chunk in ``CACHE/<key>.partial/`` (``Partial``), each
chunk a file written whole (by whichever process translated it: under torchrun each rank keeps
its share there), so an interrupted translation goes on with the lines no whole chunk holds.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mt_cli.config.options import DEFAULT_OPTIONS, TranslateOptions
from mt_cli.config.sections import CorpusConfig
from mt_cli.disk.files import file_sha256, json_digest, write_json
from mt_cli.disk.layout import RunDir, run_and_checkpoint
from mt_cli.disk.reading import check_readable_file
from mt_cli.errors import CheckpointError, DataError

# Bump when the layout or the meaning of a key changes: older caches are then remade. 2: the
# decoding is asdict(TranslateOptions); 3: teachers (ensembles, engines), n-best pairs, scores.
FORMAT = 3
TEXT, TRANSLATION, SCORES, PROVENANCE = "text.txt", "translation.txt", "scores.txt", "provenance.json"
_CHUNK_NAME = re.compile(r"(\d{12})-(\d{12})\.json")  # lines [first, end) of the text


@dataclass(frozen=True)
class Member:
    """One run of a teacher: its directory, the checkpoint it translates with, that file's SHA-256."""

    run: Path
    checkpoint: Path
    sha256: str


@dataclass(frozen=True)
class Synthetic:
    """A translated entry resolved: its teacher, text and cache folder."""

    teachers: tuple[Member, ...]  # ``run``, then the ``ensemble`` runs combined with it per step
    engine: str  # mt or ctranslate2 (the run's export of its checkpoint)
    text: tuple[Path, ...]
    text_sha256: tuple[str, ...]
    languages: tuple[str, str]  # (the text's language, the language it is translated into)
    options: TranslateOptions  # as the entry asks, not yet resolved with the run's defaults
    train_limit: int | None
    side: str  # which side of the pairs the text is: target (back-translation) or source
    key: str = ""
    directory: Path = Path()  # CACHE/<key>: present when the translations are made

    @property
    def run(self) -> Path:
        """The teacher's first run (its card gives the decoding defaults)."""
        return self.teachers[0].run

    @property
    def checkpoint(self) -> Path:
        return self.teachers[0].checkpoint

    @property
    def partial(self) -> Partial:
        """Where the chunks of a translation not finished yet are kept."""
        return Partial(self.directory.with_name(self.directory.name + ".partial"))

    def key_inputs(self) -> dict[str, Any]:
        """What the translations depend on (hashed into the folder name)."""
        return {
            "format": FORMAT,
            "checkpoints_sha256": [member.sha256 for member in self.teachers],
            "engine": self.engine,
            "text_sha256": list(self.text_sha256),
            "languages": list(self.languages),
            "decoding": self.options.record(),
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

    def scores(self) -> Iterator[float]:
        """Each pair's score, in order (DataError naming the file if a line is not a number)."""
        path = self.directory / SCORES
        with open(path, encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                try:
                    yield float(line)
                except ValueError:
                    raise DataError(
                        f"{path} line {number} is not a score ({line.strip()!r}); delete {self.directory} "
                        "and run again"
                    ) from None


@dataclass(frozen=True)
class Chunk:
    """Lines ``first`` to ``first + len(lines)`` of the text and their translations: per line its
    hypotheses, best first (one, or the n-best list), and each one's score (``scores.txt``'s)."""

    first: int
    lines: list[str]
    translations: list[list[str]]
    scores: list[list[float]]
    cut: int  # lines cut to the teacher's positions
    seconds: float

    @property
    def end(self) -> int:
        return self.first + len(self.lines)


class Partial:
    """The chunks of a translation that is not finished yet, one JSON file each (written whole, so
    one that exists is complete), named by the lines it holds."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def done(self) -> int:
        """How many lines of the text, from the first, the kept chunks hold (0: none kept)."""
        return self._contiguous()[1]

    def save(self, chunk: Chunk) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        write_json(dataclasses.asdict(chunk), self.directory / f"{chunk.first:012d}-{chunk.end:012d}.json")

    def chunks(self) -> Iterator[Chunk]:
        """The kept chunks in order, from the first line on without a gap (DataError if one is damaged)."""
        for path in self._contiguous()[0]:
            try:
                yield Chunk(**json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError) as err:
                raise DataError(
                    f"{path} is unreadable ({err}); delete {self.directory} and run again"
                ) from None

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def kept(self) -> list[tuple[int, int]]:
        """The lines [first, end) of the chunks ``chunks`` reads, in order and without overlaps; a
        gap between two is lines a rank had not finished when its run stopped."""
        return [(first, end) for first, end, _ in self._chain()]

    def _contiguous(self) -> tuple[list[Path], int]:
        """The chunk files that follow each other from line 0, and the line after the last."""
        paths, end = [], 0
        for first, last, path in self._chain():
            if first != end:
                break
            paths.append(path)
            end = last
        return paths, end

    def _chain(self) -> list[tuple[int, int, Path]]:
        """The kept chunks in order of their first line, the longest where several start on the
        same line, skipping one that starts inside the last taken (runs with other shares of
        the lines can leave such overlaps)."""
        spans: dict[int, tuple[int, Path]] = {}
        if self.directory.is_dir():
            for path in self.directory.iterdir():
                if (name := _CHUNK_NAME.fullmatch(path.name)) is not None:
                    first, end = int(name[1]), int(name[2])
                    if end > spans.get(first, (first, path))[0]:
                        spans[first] = (end, path)
        chain, taken = [], 0
        for first in sorted(spans):
            if first >= taken:
                taken, path = spans[first]
                chain.append((first, taken, path))
        return chain


@dataclass
class Totals:
    """What ``write_pairs`` wrote."""

    lines: int = 0  # of the text
    pairs: int = 0  # rows: a line's n-best list is several
    cut: int = 0  # lines cut to the teacher's positions
    seconds: float = 0.0  # spent translating the chunks


def write_pairs(chunks: Iterable[Chunk], directory: Path) -> Totals:
    """text.txt, translation.txt and scores.txt in ``directory``, a row per hypothesis, synced."""
    totals = Totals()
    with (
        open(directory / TEXT, "w", encoding="utf-8", newline="\n") as text,
        open(directory / TRANSLATION, "w", encoding="utf-8", newline="\n") as out,
        open(directory / SCORES, "w", encoding="utf-8", newline="\n") as scores,
    ):
        for chunk in chunks:
            rows = zip(chunk.lines, chunk.translations, chunk.scores, strict=True)
            for line, translations, line_scores in rows:
                for translation, score in zip(translations, line_scores, strict=True):
                    text.write(line + "\n")
                    out.write(translation + "\n")
                    scores.write(f"{score:.6f}\n")
                totals.pairs += len(translations)
            totals.lines += len(chunk.lines)
            totals.cut += chunk.cut
            totals.seconds += chunk.seconds
        for handle in (text, out, scores):
            handle.flush()
            os.fsync(handle.fileno())
    return totals


def options_of(entry: CorpusConfig) -> TranslateOptions:
    """The options an entry's text is translated with: its ``decode`` block (None: the run's own
    beam search), into the entry's other language, with scores (``min_score`` reads them)."""
    decode = DEFAULT_OPTIONS if entry.decode is None else entry.decode
    return dataclasses.replace(decode, scores=True, tgt_lang=text_languages(entry)[1])


def text_languages(entry: CorpusConfig) -> tuple[str, str]:
    """(language of the entry's text, language it is translated into)."""
    forward = entry.text_side == "source"
    pair = (entry.src_lang, entry.tgt_lang) if forward else (entry.tgt_lang, entry.src_lang)
    if pair[0] is None or pair[1] is None:
        raise ValueError("an entry of data.entries() has both languages")
    return pair[0], pair[1]


def resolve(entry: CorpusConfig) -> Synthetic:
    """The teacher, text files and cache folder of a translated entry: CheckpointError if a run
    or its checkpoint is missing, DataError if a text file is, each naming the entry's key
    (``run: ...``, ``ensemble: ...``, ``text: ...``)."""
    if entry.run is None:
        raise ValueError("rules.check_data requires run for a translated corpus")
    teachers = (_member(entry.run, "run"), *(_member(spec, "ensemble") for spec in entry.ensemble))
    text = tuple(Path(path) for path in entry.text)
    for path in text:
        try:
            check_readable_file(path)
        except DataError as err:
            raise DataError(f"text: {err}") from None
    synthetic = Synthetic(
        teachers=teachers,
        engine=entry.engine,
        text=text,
        text_sha256=tuple(map(sha256, text)),
        languages=text_languages(entry),
        options=options_of(entry),
        train_limit=entry.train_limit,
        side=entry.text_side,
    )
    cache = Path(entry.cache_dir) if entry.cache_dir is not None else RunDir(teachers[0].run).synthetic
    key = json_digest(synthetic.key_inputs())
    return dataclasses.replace(synthetic, key=key, directory=cache / key)


def _member(spec: str, key: str) -> Member:
    try:
        root, name = run_and_checkpoint(spec)
        checkpoint = RunDir(root).existing().find_checkpoint(name)
    except CheckpointError as err:
        raise CheckpointError(f"{key}: {err}") from None
    return Member(root, checkpoint, sha256(checkpoint))


def fingerprint(entry: CorpusConfig) -> dict[str, Any]:
    """What identifies the pairs (``corpus.train_fingerprint``): the key of the translations, which
    side the text is on and the score filter. Where the cache is does not matter."""
    return {
        "synthetic": resolve(entry).key,
        "side": entry.text_side,
        "train_limit": entry.train_limit,
        "min_score": entry.min_score,
    }


def sha256(path: Path) -> str:
    """``file_sha256``, computed once per file version: a corpus is fingerprinted several times."""
    stat = path.stat()
    return _sha256_of(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    return file_sha256(Path(path))
