"""What ``mt train`` and ``mt prepare`` do around the training loop: the run directory, the
tokenizers (trained by rank 0 while the other ranks wait), the data, and the closing scores.

Rank 0 holds the run's lock file from the start (``runlock``): one writer per run. What a
command made in a run directory it created is removed again if it fails or is interrupted before
the first checkpoint: nothing of value is in it yet, and an empty run would block the next fresh
start. Tokenizers of a run that has checkpoints are never retrained: the checkpoints depend
on them.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, suppress
from pathlib import Path

import torch

from mt_cli.config.recipe import save_config
from mt_cli.config.sections import Config
from mt_cli.data.corpus import train_fingerprint
from mt_cli.data.mixing import MixedCorpus
from mt_cli.data.prepare import (
    TrainingData,
    describe_corpora,
    describe_corpus,
    load_eval_splits,
    load_more_directions,
    prepare_corpora,
    tokenizer_sample,
    training_corpus,
    training_data,
)
from mt_cli.data.prepared import PreparedCorpus
from mt_cli.disk.layout import RunDir
from mt_cli.disk.runlock import RunLock, make_run_directory
from mt_cli.errors import InputError
from mt_cli.runtime.device import amp_dtype, resolve_device
from mt_cli.runtime.distributed import Distributed
from mt_cli.text.tokenizer import (
    Tokenizer,
    load_tokenizers,
    prepare_tokenizers,
    tokenizer_path,
    tokenizers_match,
)
from mt_cli.train.backtranslation import make_synthetic
from mt_cli.train.progress import LogFile, summary_writer
from mt_cli.train.resuming import Start, check_same_start, check_start
from mt_cli.train.trainer import Trainer
from mt_cli.train.warm_start import Parent, adopt_tokenizers, find_parent


def train(
    cfg: Config, run_dir: Path, resume: bool, log: Callable[[str], None] = print, auto: bool = False
) -> dict:
    """``mt train``: from a validated config to a trained, scored run directory; ``auto``: the
    start was decided by ``--resume auto`` (``resuming``).

    Every log line of the main process also goes to ``RUN/train.log``.
    """
    run, start = RunDir(Path(run_dir)), Start(resume, auto)
    device = resolve_device(cfg.train.device)
    dist = Distributed.from_env(device, cfg.train.dist_timeout_minutes)
    try:
        amp_dtype(device, cfg.train.amp)  # refuse a bad precision before any work
        if cfg.train.tensorboard:
            summary_writer()  # and a missing tensorboard package (on every rank: all stop together)
        _check_directory(run)
        check_same_start(run, start, dist)
        parent = _parent(cfg, run, resume)  # checked before the run directory is made
        # Rank 0 alone writes into the run (the other ranks read what it wrote), so it alone locks.
        with _owned(run, "train", enabled=dist.is_main):
            check_start(run, start)  # under the lock: a second `mt train` is told who holds it
            if dist.is_main:
                save_config(cfg, run.config)
                log = LogFile(run.log, echo=log)
            return _train_in(cfg, run, resume, parent, dist, log if dist.is_main else (lambda message: None))
    finally:
        dist.close()


def prepare(cfg: Config, run_dir: Path, log: Callable[[str], None]) -> list[str]:
    """``mt prepare``: train or reuse both tokenizers on a sample of the training pairs, write or
    reuse the prepared corpus, and report on both."""
    run = RunDir(run_dir)
    _check_directory(run)
    parent = _parent(cfg, run, resume=bool(run.previous_training()))
    with _owned(run, "prepare", enabled=True):
        make_synthetic(cfg, log)  # the pairs of translated corpora, translated or reused
        sample = tokenizer_sample(cfg)
        src_tok, tgt_tok = _tokenizers(cfg, run, lambda: sample, Distributed(), log, parent)
        prepared = prepare_corpora(cfg, run.root, src_tok, tgt_tok, log)
    evaluation = load_eval_splits(cfg, log=lambda message: None)  # the report says the counts
    sections = {
        "train": sample,  # the tokenizers' sample: all of train when it is small
        **{name: (split["src"], split["tgt"]) for name, split in evaluation.items()},
    }
    report = describe_corpus(sections, src_tok, tgt_tok)
    paths = (tokenizer_path(run.root, tok.lang) for tok in (src_tok, tgt_tok))
    return [
        *report,
        f"tokenizers: {', '.join(map(str, paths))}",
        *describe_corpora(cfg, prepared),
    ]


def _check_directory(run: RunDir) -> None:
    if run.root.exists() and not run.root.is_dir():
        raise InputError(f"run directory {run.root} is a file; give a directory for --run")


def _parent(cfg: Config, run: RunDir, resume: bool) -> Parent | None:
    """The checked parent of a warm start; None when there is none, or when the run already holds
    what it took from it (a resume)."""
    if cfg.train.init_from is None or resume:
        return None
    return find_parent(cfg.train.init_from, cfg, run)


@contextmanager
def _owned(run: RunDir, command: str, enabled: bool) -> Iterator[None]:
    """Create the run directory if need be and hold its lock for the block (``runlock``).

    If the block fails before any checkpoint in a directory this process created, what it made
    there is removed: the entries that appeared after it took the lock (no other mt process can
    have written one meanwhile), then the directory if nothing else is left in it. A directory
    that already existed, or whose lock another process took first, is left as it is.
    """
    if not enabled:
        yield
        return
    created = make_run_directory(run.root)
    with RunLock(run.lock, command) as lock:
        before = set(os.listdir(run.root))
        try:
            yield
        except BaseException:
            if created and not any(run.checkpoints.glob("*.pt")):
                for entry in (run.root / name for name in set(os.listdir(run.root)) - before):
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry)
                    else:
                        entry.unlink(missing_ok=True)
                lock.release()
                with suppress(OSError):  # not empty: something else put files there
                    run.root.rmdir()
            raise


def _tokenizers(
    cfg: Config,
    run: RunDir,
    sample: Callable[[], tuple[list[str], list[str]]],
    dist: Distributed,
    log: Callable[[str], None],
    parent: Parent | None = None,
) -> tuple[Tokenizer, Tokenizer]:
    """Train (rank 0, from ``sample()``) or reuse the two tokenizers; the other ranks wait, then load them.

    A warm start's tokenizers are its parent's: copied from ``parent`` when it starts, never trained.
    """
    if cfg.train.init_from is not None:
        if dist.is_main and parent is not None:
            adopt_tokenizers(parent, run, log)
        dist.barrier()
        return load_tokenizers(run.root, *cfg.data.sides(), imported=cfg.tokenizer.imported)
    corpus = train_fingerprint(cfg.data)
    if dist.is_main and tokenizers_match(cfg, run.root, corpus):
        paths = " and ".join(str(run.tokenizer(side)) for side in cfg.data.sides())
        log(f"tokenizers: reusing {paths} (same settings, same training files)")
    elif dist.is_main:
        frozen = bool(run.previous_training())
        prepare_tokenizers(cfg, run.root, *sample(), log=log, frozen=frozen, corpus=corpus)
    dist.barrier()
    return load_tokenizers(run.root, *cfg.data.sides())


def _prepared(
    cfg: Config, run: RunDir, toks: tuple[Tokenizer, Tokenizer], dist: Distributed, log: Callable[[str], None]
) -> PreparedCorpus | MixedCorpus:
    """Rank 0 writes (or reuses) the prepared corpora; the other ranks wait, then map the same files."""
    parts = prepare_corpora(cfg, run.root, *toks, log) if dist.is_main else None
    dist.barrier()
    return training_corpus(cfg, parts if parts is not None else prepare_corpora(cfg, run.root, *toks, log))


def prepare_data(
    cfg: Config, run: RunDir, dist: Distributed, log: Callable[[str], None], parent: Parent | None = None
) -> TrainingData:
    """The evaluation splits (of every direction of the run), the tokenizers (trained by rank 0
    into the run directory, reused, or adopted from a warm start's ``parent``) and the training
    pairs (prepared once, memory-mapped by every rank): what the trainer reads."""
    make_synthetic(cfg, log, dist)  # the pairs of translated corpora: each rank translates its share
    splits, more = load_eval_splits(cfg, log), load_more_directions(cfg, log)
    src_tok, tgt_tok = _tokenizers(cfg, run, lambda: tokenizer_sample(cfg), dist, log, parent)
    prepared = _prepared(cfg, run, (src_tok, tgt_tok), dist, log)
    return training_data(cfg, splits, src_tok, tgt_tok, prepared, more)


def _train_in(
    cfg: Config,
    run: RunDir,
    resume: bool,
    parent: Parent | None,
    dist: Distributed,
    log: Callable[[str], None],
) -> dict:
    torch.manual_seed(cfg.train.seed)
    trainer = Trainer(cfg, run, prepare_data(cfg, run, dist, log, parent), dist, log)
    if resume:
        trainer.resume()
    with _stop_requests(trainer), closing(trainer.metrics):
        if parent is not None:
            trainer.start_from(parent)  # the parent's weights, scored at update 0
        progress = trainer.fit()
    if not dist.is_main:
        return {}
    report = trainer.validator.finish(progress)
    for name, scores in report["scores"].items():
        log(f"{report['split']} {name}: BLEU {scores['bleu']:.2f} chrF {scores['chrf']:.2f}")
    for direction, found in list(report.get("directions", {}).items())[1:]:  # the first is above
        for name, scores in found.items():
            log(f"{report['split']} {direction} {name}: BLEU {scores['bleu']:.2f} chrF {scores['chrf']:.2f}")
    return report


@contextmanager
def _stop_requests(trainer: Trainer) -> Iterator[None]:
    """Ctrl-C and SIGTERM ask the trainer to stop at the next update (it saves last.pt first); a
    second one gets the default behaviour back. The previous handlers return afterwards."""

    def request_stop(signum: int, frame: object) -> None:
        trainer.stop_signal = signal.Signals(signum).name
        signal.signal(signum, previous[signum])

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, request_stop)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
