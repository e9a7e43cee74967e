"""``mt score``: the model's log-probability of given translations (forced decoding)."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import typer

from mt_cli.cli.common import option, standard_stream, user_errors
from mt_cli.cli.engines import DEFAULT_MODEL, ModelChoice, opens_model
from mt_cli.cli.translation import BufferOption, TgtLangOption, _write
from mt_cli.disk.files import AtomicTextOutput, check_output_path
from mt_cli.disk.reading import check_input_file
from mt_cli.errors import InputError

Pairs = tuple[list[str], list[str]]

SrcOption = option(Path | None, "--src", help="Source sentences, one a line (with --tgt).")
TgtOption = option(Path | None, "--tgt", help="The translations to score, line by line with --src.")
TsvOption = option(
    Path | None,
    "--input",
    "-i",
    help="Tab-separated source<TAB>target lines instead of --src/--tgt (neither: standard input).",
)
ScoresOutputOption = option(Path | None, "--output", "-o", help="Write the scores to this file.")
PerTokenOption = option(bool, "--per-token", help="Add each target piece with its log-probability.")
ScoreJsonOption = option(
    bool, "--json", help="One JSON object per line: source, target, log_prob, tokens, mean_log_prob."
)


@user_errors
@opens_model
def score(
    choice: ModelChoice = DEFAULT_MODEL,
    src: SrcOption = None,
    tgt: TgtOption = None,
    input_file: TsvOption = None,
    output_file: ScoresOutputOption = None,
    per_token: PerTokenOption = False,
    as_json: ScoreJsonOption = False,
    buffer_size: BufferOption = 1000,
    tgt_lang: TgtLangOption = None,
) -> None:
    """Score given translations: per line, the summed and the per-token (mean) log-probability
    (natural log) of the target given the source, in the training tokenization (target pieces,
    then EOS) and without label smoothing. Minus the mean over a corpus (summed log-probabilities
    over summed tokens) is the validation loss that training reports.

    Output: "sum<TAB>mean" per line (--per-token adds "piece:log_prob ..."), or --json.
    """
    _check_paths(src, tgt, input_file, output_file)
    if output_file is None:
        standard_stream("stdout")
    if src is None and input_file is None:
        standard_stream("stdin", "give --src and --tgt, or --input FILE (a TSV)")
    model = choice.open()
    chunks = _pair_chunks(src, tgt, input_file, buffer_size)
    output = AtomicTextOutput(output_file) if output_file is not None else None
    sink = output or sys.stdout
    from mt_cli.cli.decoding import score_lines

    try:
        for scores in model.score_stream(chunks, per_token, tgt_lang):
            _write(
                sink, "".join(f"{line}\n" for line in score_lines(scores, per_token, as_json)), output_file
            )
        if output is not None:
            output.commit()
    finally:
        if output is not None:
            output.discard()


def _check_paths(
    src: Path | None, tgt: Path | None, input_file: Path | None, output_file: Path | None
) -> None:
    """Every path of ``mt score``, and --src/--tgt line counts, before the run is loaded."""
    from mt_cli.disk.reading import count_lines

    if (src is None) != (tgt is None):
        raise InputError("--src and --tgt go together: give both files, or a TSV with --input")
    if src is not None and input_file is not None:
        raise InputError("give either --src and --tgt or --input (a TSV), not both")
    inputs = [
        (p, name) for p, name in ((src, "--src"), (tgt, "--tgt"), (input_file, "--input")) if p is not None
    ]
    for path, name in inputs:
        check_input_file(path, name)
    if output_file is not None:
        for path, name in inputs:
            if output_file.resolve() == path.resolve():
                raise InputError(f"--output {output_file} is the {name} file; write the scores elsewhere")
        check_output_path(output_file, "--output")
    if src is not None and tgt is not None:
        counts = count_lines(src), count_lines(tgt)
        if None not in counts and counts[0] != counts[1]:
            raise InputError(
                f"--src {src} has {counts[0]} lines but --tgt {tgt} has {counts[1]}; they must pair up"
            )


def _pair_chunks(
    src: Path | None, tgt: Path | None, input_file: Path | None, buffer_size: int
) -> Iterator[Pairs]:
    """(sources, targets) in chunks of ``buffer_size`` lines, from the files or a TSV (or stdin)."""
    from mt_cli.disk.reading import stream_file_lines, stream_lines

    if src is not None and tgt is not None:
        pairs = _zipped(stream_file_lines(src), stream_file_lines(tgt), src, tgt)
    elif input_file is not None:
        pairs = _tsv(stream_file_lines(input_file), str(input_file))
    else:
        stdin = standard_stream("stdin", "give --src and --tgt, or --input FILE (a TSV)")
        size = 1 if stdin.isatty() else buffer_size
        return _chunks(_tsv(stream_lines(stdin.buffer, "standard input"), "standard input"), size)
    return _chunks(pairs, buffer_size)


def _chunks(pairs: Iterator[tuple[str, str]], size: int) -> Iterator[Pairs]:
    while chunk := list(itertools.islice(pairs, size)):
        yield [s for s, _ in chunk], [t for _, t in chunk]


def _zipped(
    sources: Iterator[str], targets: Iterator[str], src: Path, tgt: Path
) -> Iterator[tuple[str, str]]:
    """Pairs of lines; a file that ends first is an InputError (for files whose length could not
    be counted up front)."""
    missing = object()
    for number, (source, target) in enumerate(itertools.zip_longest(sources, targets, fillvalue=missing), 1):
        if source is missing or target is missing:
            shorter = src if source is missing else tgt
            raise InputError(
                f"{shorter} ends at line {number - 1} but the other file goes on; they must pair up"
            )
        yield str(source), str(target)


def _tsv(lines: Iterator[str], name: str) -> Iterator[tuple[str, str]]:
    for number, line in enumerate(lines, 1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise InputError(
                f"{name} line {number} has {len(fields)} tab-separated fields; write source<TAB>target"
            )
        yield fields[0], fields[1]


def register(app: typer.Typer) -> None:
    app.command()(score)
