"""Making the pairs of translated corpora (``source: backtranslation`` and ``source:
distillation``), before the data is read.

Back-translation (Sennrich et al. 2016) gives a corpus target-side text and, as its sources, the
text's translation by a model of the reverse direction; forward translation (``side: source``,
self-training, or ``source: distillation``, sequence-level knowledge distillation, Kim and Rush
2016) gives it source-side text and, as its targets, a forward model's translation. The teacher
is ``run``, alone or combined per step with its ``ensemble`` runs (what `mt translate --ensemble`
decodes), in mt's engine or in CTranslate2's (``engine: ctranslate2``: the run's export of the
checkpoint, as `--engine ctranslate2` makes and keeps it). Beam search, its n-best list (several
pairs per line: data diversification, Nguyen et al. 2020) or, for back-translation, sampling
(Edunov et al. 2018: sampled sources teach more than beam ones), with the entry's ``decode``
options. The data layer cannot decode, so this module, run by ``mt prepare`` and ``mt train``
(on every rank) before tokenizers and prepared corpora, translates the text into the folder
``data.synthetic`` names and the data layer reads it like two text files.

Every teacher is opened and checked (runs, direction, shared tokenizers, options) before any
text is translated. The text streams through in chunks (``CHUNK`` lines per translate call,
decoded by the engine's worker processes, under a progress bar at a terminal and a log line per
chunk elsewhere): 145,000 captions never sit in memory at once. Each chunk is kept as it is done
(``synthetic.Partial``), so an interrupted translation goes on with the lines no whole chunk
holds; the folder that later runs reuse, without loading a model, is written whole from the
chunks at the end. Under torchrun each rank translates its share of the chunks on its own device
(``shares``) and rank 0 writes the folder. Decoding is fp32 on ``train.device``, so the pairs do
not depend on the machine's bf16 support, nor on how the lines were shared out.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

from mt_cli.config.options import OptionError, TranslateOptions
from mt_cli.config.sections import Config, CorpusConfig
from mt_cli.data import synthetic
from mt_cli.decode.engine import Engine, EngineKind
from mt_cli.decode.hypotheses import per_piece
from mt_cli.decode.members import ensemble_of
from mt_cli.decode.translator import Translator
from mt_cli.disk.files import check_output_path
from mt_cli.disk.layout import RunDir
from mt_cli.disk.reading import count_lines, stream_file_lines
from mt_cli.errors import CheckpointError, ConfigError, InputError, MtError
from mt_cli.runtime.device import resolve_device
from mt_cli.runtime.distributed import Distributed
from mt_cli.runtime.precision import ComputeType
from mt_cli.train import shares
from mt_cli.train.synthetic_folder import publish_pairs
from mt_cli.trained import load_trained

# Lines per translate call (sorted by length inside it, so its batches are full) and per kept chunk.
CHUNK = 10_000


@dataclass
class _Teacher:
    """An entry's translations to make, with the engine that makes them and its resolved options."""

    label: str  # data.corpora[i]
    made: synthetic.Synthetic
    engine: Engine
    options: TranslateOptions


def make_synthetic(cfg: Config, log: Callable[[str], None], dist: Distributed | None = None) -> None:
    """Translate the text of every translated corpus of ``cfg``, or reuse the translations made
    before (by this run or any other). Every teacher is checked before any text is translated.

    Under torchrun every rank calls this: each translates its share of every text on its own
    device, then rank 0 writes the folders, which all ranks can read when it returns.
    """
    dist = dist or Distributed()
    teachers = [_opened(made, label, cfg.train.device, dist) for label, made in _todo(cfg, log)]
    deals = [_share(teacher.made, dist.rank, dist.world_size) for teacher in teachers]
    dist.barrier()  # every rank has dealt from the chunks kept before any rank keeps one
    finished = [(teacher.label, teacher.made, teacher.options) for teacher in teachers]
    while teachers:
        _translate(teachers.pop(0), deals.pop(0), log, dist)  # each teacher is let go when its share is done
    dist.barrier()  # every share is kept
    if dist.is_main:
        for label, made, options in finished:
            _assemble(label, made, options, cfg.train.device, log, dist)
    dist.barrier()  # the folders are in place before any rank reads them


def _todo(cfg: Config, log: Callable[[str], None]) -> list[tuple[str, synthetic.Synthetic]]:
    """(label, translations) of each translated corpus whose translations are not made yet."""
    todo: dict[str, tuple[str, synthetic.Synthetic]] = {}
    for index, entry in enumerate(cfg.data.entries()):
        if entry.translated:
            label = f"data.corpora[{index}]"
            made = _resolved(entry, label)
            if made.exists():
                _log_reuse(made, label, log)
            else:
                todo.setdefault(made.key, (label, made))  # two entries asking the same: translated once
    return list(todo.values())


def _share(made: synthetic.Synthetic, rank: int, world_size: int) -> shares.Share:
    return shares.share_of(made.partial.kept(), _line_count(made), rank, world_size, CHUNK)


def _assemble(
    label: str,
    made: synthetic.Synthetic,
    options: TranslateOptions,
    device: str,
    log: Callable[[str], None],
    dist: Distributed,
) -> None:
    """Rank 0: the folder written from every rank's chunks. Lines no chunk holds (a rank found the
    folder made by another process, and did not translate) are translated here first."""
    if made.exists():  # another process made the same translations meanwhile: theirs stay
        made.partial.remove()
        return
    rest = _share(made, 0, 1)
    if rest.chunks:
        _translate(_opened(made, label, device, dist), rest, log, dist)
    publish_pairs(label, made, options, log)


def _resolved(entry: CorpusConfig, label: str) -> synthetic.Synthetic:
    try:
        return synthetic.resolve(entry)
    except MtError as err:  # a missing run, checkpoint or text file: say which entry
        raise type(err)(f"{label}.{err}") from None


def _log_reuse(made: synthetic.Synthetic, label: str, log: Callable[[str], None]) -> None:
    provenance = made.provenance()
    more = len(provenance["ensemble"])
    log(
        f"{label}: reusing {provenance['pairs']:,} synthetic pairs in {made.directory} "
        f"({provenance['direction']} by {provenance['checkpoint']}"
        + (f" and {more} more in an ensemble" if more else "")
        + ")"
    )


def _opened(made: synthetic.Synthetic, label: str, device: str, dist: Distributed) -> _Teacher:
    """The teacher of ``made`` loaded on ``device`` (under torchrun the rank's own GPU) and
    checked: it translates the text's language into the other, its checkpoints did not change
    while they were read, the options suit it and the cache can be written."""
    engine = _engine(made, label, dist.device(resolve_device(device)))
    _check_direction(engine, made, label)
    changed = [m.checkpoint for m in made.teachers if synthetic.sha256(m.checkpoint) != m.sha256]
    if changed:
        raise CheckpointError(
            f"{label}.run: {changed[0]} changed while it was read (is {changed[0].parent.parent} still "
            "training?); run the command again"
        )
    try:
        options = engine.resolve(made.options)
    except OptionError as err:
        raise ConfigError(f"{label}.decode.{err.key}: {err}") from None
    try:
        made.directory.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(
            f"{label}.cache_dir: cannot create {made.directory.parent} ({err.strerror or err}); "
            f"set {label}.cache_dir to a writable directory"
        ) from None
    check_output_path(made.directory, f"{label}.cache_dir")
    return _Teacher(label, made, engine, options)


def _engine(made: synthetic.Synthetic, label: str, device: torch.device) -> Engine:
    """mt's engine of the teacher's runs (an ensemble of several), or CTranslate2's of its export."""
    if EngineKind(made.engine) is EngineKind.CTRANSLATE2:
        return _exported(made.teachers[0], label, device)
    members = []
    for index, member in enumerate(made.teachers):
        key = "run" if index == 0 else "ensemble"
        try:
            trained = load_trained(member.run, str(member.checkpoint))
        except CheckpointError as err:
            raise CheckpointError(f"{label}.{key}: {err}") from None
        members.append(
            Translator.of(trained, device, ComputeType.FLOAT32)
        )  # the exact weights, on any machine
    try:
        return ensemble_of(members)
    except InputError as err:  # tokenizers that differ: members of other languages or vocabularies
        raise CheckpointError(f"{label}.ensemble: {err}") from None


def _exported(member: synthetic.Member, label: str, device: torch.device) -> Engine:
    """CTranslate2's engine of the export `--engine ctranslate2` keeps of the checkpoint, in float32."""
    from mt_cli.decode.ctranslate2 import CTranslate2Engine

    model_dir = RunDir(member.run).engine_export(member.sha256)
    if not model_dir.is_dir():
        raise CheckpointError(
            f"{label}.engine: {member.run} has no CTranslate2 export of {member.checkpoint} "
            f"(no {model_dir}); make it with `mt translate --engine ctranslate2 --run {member.run} "
            f"--checkpoint {member.checkpoint} < /dev/null`, or set {label}.engine: mt"
        )
    return CTranslate2Engine(model_dir, device.type, ComputeType.FLOAT32, device_index=device.index or 0)


def _check_direction(engine: Engine, made: synthetic.Synthetic, label: str) -> None:
    """CheckpointError unless the teacher translates the text's language into the one wanted."""
    text_lang, to_lang = made.languages
    if (text_lang, to_lang) not in engine.directions:
        what = "back-translation" if made.side == "target" else "forward translation"
        runs = ", ".join(f"{src}->{tgt}" for src, tgt in engine.directions)
        raise CheckpointError(
            f"{label}.run: {made.run} translates {runs}, but {what} of this corpus's {text_lang} text "
            f"(its {made.side} side) needs a run that translates {text_lang}->{to_lang}"
        )


def _translate(teacher: _Teacher, share: shares.Share, log: Callable[[str], None], dist: Distributed) -> None:
    """This rank's share of the teacher's text translated, chunk after chunk, each kept as it is done."""
    from tqdm import tqdm

    label, made = teacher.label, teacher.made
    _log_start(teacher, share, log, dist)
    start, done, goal = time.perf_counter(), share.kept, share.kept + share.lines
    on_rank = f" by rank {dist.rank}" if dist.active else ""
    # From where the kept chunks end; one bar on the terminal that every rank writes to: rank 0's.
    bar = tqdm(
        total=goal,
        initial=done,
        desc="translate",
        unit=" lines",
        leave=False,
        disable=None if dist.is_main else True,
    )
    with bar:
        try:
            for first, lines in shares.lines_of(_text_lines(made, label), share.chunks):
                made.partial.save(_chunk(teacher, lines, first))
                done += len(lines)
                bar.update(len(lines))
                bar.refresh()  # a chunk is minutes of work: show it, whatever tqdm's mininterval
                if bar.disable:  # no bar in a log file: a line per chunk instead
                    elapsed = time.perf_counter() - start
                    log(f"{label}: {done:,} of {goal:,} lines translated{on_rank} ({elapsed:.0f} s)")
        except InputError:  # text that is not UTF-8 must change, and with it the key: nothing to go on from
            made.partial.remove()
            raise


def _log_start(teacher: _Teacher, share: shares.Share, log: Callable[[str], None], dist: Distributed) -> None:
    made = teacher.made
    text_lang, to_lang = made.languages
    kept = "the first " if made.partial.done() == share.kept else ""  # else with gaps: ranks stopped midway
    checkpoints = " + ".join(str(m.checkpoint) for m in made.teachers)
    log(
        f"{teacher.label}: translating {share.left:,} lines of {text_lang} text into {to_lang} with "
        f"{checkpoints} ({made.engine}, {_describe(teacher.options)}) into {made.directory}"
        + (f"; {kept}{share.kept:,} were translated before ({made.partial.directory})" if share.kept else "")
        + (f"; rank {dist.rank} of {dist.world_size} translates {share.lines:,}" if dist.active else "")
    )


def _chunk(teacher: _Teacher, lines: Sequence[str], first: int) -> synthetic.Chunk:
    """Lines ``first``... translated: each line's hypotheses as one line each, and their scores."""
    cut = 0

    def count_cut(message: str) -> None:
        nonlocal cut
        cut += 1

    start = time.perf_counter()
    found = teacher.engine.translate(lines, teacher.options, count_cut, first + 1)
    alpha = teacher.options.alpha
    return synthetic.Chunk(
        first=first,
        lines=list(lines),
        translations=[[_one_line(h.text) for h in t.hypotheses] for t in found],
        scores=[[per_piece(h.score, len(h.tokens), alpha) for h in t.hypotheses] for t in found],
        cut=cut,
        seconds=time.perf_counter() - start,
    )


def _describe(options: TranslateOptions) -> str:
    s = options.sampling
    if s is None:
        search = "greedy" if options.beam_size == 1 else f"beam {options.beam_size}"
        return search + (f", {options.n_best}-best" if options.n_best > 1 else "")
    return (
        f"sampling top-k {s.top_k or 'all'}, top-p {s.top_p:g}, temperature {s.temperature:g}, seed {s.seed}"
    )


def _text_lines(made: synthetic.Synthetic, label: str) -> Iterator[str]:
    """The text files one after another, the first ``train_limit`` lines (InputError if not UTF-8)."""
    lines = itertools.chain.from_iterable(map(stream_file_lines, made.text))
    try:
        yield from itertools.islice(lines, made.train_limit)
    except InputError as err:
        raise InputError(f"{label}.text: {err}") from None


def _line_count(made: synthetic.Synthetic) -> int:
    total = sum(count_lines(path) or 0 for path in made.text)
    return total if made.train_limit is None else min(total, made.train_limit)


def _one_line(text: str) -> str:
    """A translation as one line of the file (a line break would shift every later pair)."""
    return " ".join(text.splitlines()) if "\n" in text or "\r" in text else text
