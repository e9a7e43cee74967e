"""Making the synthetic pairs of ``source: backtranslation`` corpora, before the data is read.

Back-translation (Sennrich et al. 2016) gives a corpus target-side text and, as its sources, the
text's translation by a model of the reverse direction (``run``); forward translation (self-
training, ``side: source``) gives it source-side text and, as its targets, a forward model's
translation. Beam search or sampling (Edunov et al. 2018: sampled sources teach more than beam
ones) with the entry's ``decode`` options (a ``TranslateOptions``). The data layer cannot decode,
so this module, run by ``mt prepare`` and ``mt train`` (rank 0) before tokenizers and prepared
corpora, translates the text into the folder ``data.synthetic`` names and the data layer reads it
like two text files.

The text streams through in chunks (``CHUNK`` lines at a time, under a progress bar): 145,000
captions never sit in memory at once. The folder is written under a temporary name and renamed
when whole, so Ctrl-C or a full disk leaves nothing that a later run would reuse; one that exists
is reused without loading the model. Decoding is fp32 on ``train.device``, so the pairs do not
depend on the machine's bf16 support.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mt_cli.config.options import TranslateOptions
from mt_cli.config.sections import Config, CorpusConfig
from mt_cli.data import synthetic
from mt_cli.decode.translator import Translator
from mt_cli.disk.files import check_output_path, temporary_directory_next_to, write_json
from mt_cli.disk.reading import batched, count_lines, stream_file_lines
from mt_cli.errors import CheckpointError, ConfigError, DataError, InputError, MtError
from mt_cli.runtime.precision import ComputeType
from mt_cli.trained import load_trained
from mt_cli.version import __version__

CHUNK = 10_000  # lines per translate call: sorted by length inside it, so its batches are full


def make_synthetic(cfg: Config, log: Callable[[str], None]) -> None:
    """Translate the text of every ``source: backtranslation`` corpus of ``cfg``, or reuse the
    translations made before (by this run or any other)."""
    for index, entry in enumerate(cfg.data.corpora):
        if entry.source == "backtranslation":
            made_for(cfg.data.entries()[index], f"data.corpora[{index}]", cfg.train.device, log)


def made_for(entry: CorpusConfig, label: str, device: str, log: Callable[[str], None]) -> synthetic.Synthetic:
    """The synthetic pairs of one entry (``label`` names it in messages), made if need be."""
    try:
        made = synthetic.resolve(entry)
    except MtError as err:  # a missing run or checkpoint, or text file: say which entry
        raise type(err)(f"{label}.{'text' if isinstance(err, DataError) else 'run'}: {err}") from None
    if made.exists():
        provenance = made.provenance()
        log(
            f"{label}: reusing {provenance['lines']:,} synthetic pairs in {made.directory} "
            f"({provenance['direction']} by {provenance['checkpoint']})"
        )
        return made
    _translate(made, label, device, log)
    return made


def _translate(made: synthetic.Synthetic, label: str, device: str, log: Callable[[str], None]) -> None:
    from tqdm import tqdm

    trained = load_trained(made.run, str(made.checkpoint))
    translator = Translator.of(trained, device, ComputeType.FLOAT32)  # the exact weights, on any machine
    _check_direction(translator, made, label)
    if synthetic.sha256(made.checkpoint) != made.checkpoint_sha256:
        raise CheckpointError(
            f"{label}.run: {made.checkpoint} changed while it was read (is {made.run} still training?); "
            "run the command again"
        )
    try:
        made.directory.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(
            f"{label}.cache_dir: cannot create {made.directory.parent} ({err.strerror or err}); "
            f"set {label}.cache_dir to a writable directory"
        ) from None
    check_output_path(made.directory, f"{label}.cache_dir")
    options = translator.resolve(made.options)
    total = _line_count(made)
    text_lang, to_lang = made.languages
    log(
        f"{label}: translating {total:,} lines of {text_lang} text into {to_lang} with {made.checkpoint} "
        f"({_describe(options)}) into {made.directory}"
    )
    cut = 0

    def warn(message: str) -> None:
        nonlocal cut
        cut += 1

    start, lines = time.perf_counter(), 0
    with temporary_directory_next_to(made.directory) as staging:
        with (
            open(staging / synthetic.TEXT, "w", encoding="utf-8", newline="\n") as text,
            open(staging / synthetic.TRANSLATION, "w", encoding="utf-8", newline="\n") as out,
            tqdm(total=total, desc="translate", unit=" lines", leave=False, disable=None) as bar,
        ):
            for chunk in batched(_text_lines(made, label), CHUNK):
                found = translator.translate(chunk, options, warn, lines + 1)
                text.writelines(line + "\n" for line in chunk)
                out.writelines(_one_line(t.text) + "\n" for t in found)
                lines += len(chunk)
                bar.update(len(chunk))
                if bar.disable:  # no bar in a log file: a line per chunk instead
                    elapsed = time.perf_counter() - start
                    log(f"{label}: {lines:,} of {total:,} lines translated ({elapsed:.0f} s)")
            for handle in (text, out):
                handle.flush()
                os.fsync(handle.fileno())
        seconds = time.perf_counter() - start
        write_json(_provenance(made, options, lines, cut, seconds), staging / synthetic.PROVENANCE)
        os.chmod(staging, 0o755)  # mkdtemp makes it private; the pairs are shared like a prepared corpus
        _publish(staging, made.directory)
    rate = lines / seconds if seconds > 0 else 0.0
    log(
        f"{label}: {lines:,} synthetic pairs in {seconds / 60:.1f} min ({rate:.0f} lines/s)"
        + (f"; {cut:,} lines cut to the model's positions" if cut else "")
    )


def _check_direction(translator: Translator, made: synthetic.Synthetic, label: str) -> None:
    """CheckpointError unless the run translates the text's language into the one wanted."""
    text_lang, to_lang = made.languages
    known = list(dict.fromkeys((e.src_lang, e.tgt_lang) for e in translator.card.data.entries()))
    if (text_lang, to_lang) not in known:
        what = "back-translation" if made.side == "target" else "forward translation"
        runs = ", ".join(f"{src}->{tgt}" for src, tgt in known)
        raise CheckpointError(
            f"{label}.run: {made.run} translates {runs}, but {what} of this corpus's {text_lang} text "
            f"(its {made.side} side) needs a run that translates {text_lang}->{to_lang}"
        )


def _describe(options: TranslateOptions) -> str:
    s = options.sampling
    if s is None:
        return "greedy" if options.beam_size == 1 else f"beam {options.beam_size}"
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


def _provenance(
    made: synthetic.Synthetic, options: TranslateOptions, lines: int, cut: int, seconds: float
) -> dict[str, Any]:
    return {
        "run": str(made.run),
        "checkpoint": str(made.checkpoint),
        "checkpoint_sha256": made.checkpoint_sha256,
        "direction": "->".join(made.languages),
        "text": [
            {"file": str(path), "sha256": sha} for path, sha in zip(made.text, made.text_sha256, strict=True)
        ],
        "train_limit": made.train_limit,
        "decoding": dataclasses.asdict(options),  # resolved: the run's beam and length penalty
        "lines": lines,
        "cut": cut,  # lines longer than the model's positions, translated from their start
        "seconds": round(seconds, 1),
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "mt_version": __version__,
        "key": made.key,
    }


def _publish(staging: Path, directory: Path) -> None:
    """Rename the whole folder into place; if another process made the same one meanwhile, keep theirs."""
    try:
        os.replace(staging, directory)
    except OSError:
        if not (directory / synthetic.PROVENANCE).is_file():
            raise
