"""Commands that use a trained run: ``mt translate`` and ``mt eval``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from mt_cli.cli.common import (
    BeamOption,
    JsonOption,
    LengthPenaltyOption,
    option,
    standard_stream,
    user_errors,
    warn,
    write_stdout,
)
from mt_cli.cli.decoding import (
    AlignmentLayerOption,
    AlignOption,
    GlossaryModeOption,
    GlossaryOption,
    PlaceholdersOption,
    SampleOption,
    SeedOption,
    TemperatureOption,
    TopKOption,
    TopPOption,
    TranslateJsonOption,
)
from mt_cli.cli.documents import (
    FormatOption,
    input_chunks,
    input_format,
    translate_whole,
    translated_documents,
)
from mt_cli.cli.engines import DEFAULT_MODEL, ModelChoice, opens_model
from mt_cli.config.options import GlossaryMode, TranslateOptions
from mt_cli.decode.engine import EngineKind
from mt_cli.disk.files import AtomicTextOutput, check_output_path
from mt_cli.disk.reading import check_input_file
from mt_cli.errors import InputError, RunFailure

if TYPE_CHECKING:
    from mt_cli.api import Model
    from mt_cli.decode.engine import Engine
    from mt_cli.decode.results import Translation
    from mt_cli.text.glossary import Glossary

TextArgument = Annotated[
    str | None, typer.Argument(help="Text to translate (default: stdin, a sentence a line).")
]
NBestOption = option(int, help="Print the N best hypotheses per line (Moses n-best format).")
InputOption = option(Path | None, "--input", "-i", help="Read sentences from this file.")
OutputOption = option(Path | None, "--output", "-o", help="Write translations to this file.")
BufferOption = option(int, min=1, help="Lines read and decoded together from a pipe or file (a terminal: 1).")
AttentionOption = option(Path | None, help="Save a cross-attention heatmap (PNG) of the first line.")
BleuOption = option(bool, "--bleu/--no-bleu", help="Report sacreBLEU (default); --no-bleu: chrF only.")
SplitOption = option(str, help="Split to score: val, test2016, test2017, mscoco2017, test2018.")
SourceOption = option(Path | None, help="Score on this source file instead of a split (needs --ref).")
RefOption = option(Path | None, help="Reference translations for --src or --hyp.")
HypOption = option(
    list[Path] | None,
    help="Score this file of translations against --ref; no model is loaded. Repeat it to compare "
    "systems: paired bootstrap resampling of each against the first, as sacrebleu --paired-bs.",
)
HypothesesOption = option(Path | None, "--output", "-o", help="Write the hypotheses to this file.")
TgtLangOption = option(
    str | None,
    "--tgt-lang",
    help="Language to write, one the model was trained to write (default: its first direction's); "
    "a multilingual model gets its target tag (<2xx>) before each source.",
)
SrcLangOption = option(
    str | None,
    "--src-lang",
    help="Language of the input, checked to be one the model reads (it selects nothing: no tag).",
)


@user_errors
@opens_model
def translate(
    text: TextArgument = None,
    choice: ModelChoice = DEFAULT_MODEL,
    beam: BeamOption = None,
    length_penalty: LengthPenaltyOption = None,
    n_best: NBestOption = 1,
    input_file: InputOption = None,
    output_file: OutputOption = None,
    buffer_size: BufferOption = 1000,
    attention: AttentionOption = None,
    sample: SampleOption = False,
    top_k: TopKOption = None,
    top_p: TopPOption = None,
    temperature: TemperatureOption = None,
    seed: SeedOption = None,
    align: AlignOption = False,
    alignment_layer: AlignmentLayerOption = None,
    as_json: TranslateJsonOption = False,
    tgt_lang: TgtLangOption = None,
    src_lang: SrcLangOption = None,
    form: FormatOption = None,
    placeholders: PlaceholdersOption = None,
    glossary: GlossaryOption = None,
    glossary_mode: GlossaryModeOption = GlossaryMode.APPEND,
) -> None:
    """Translate text: one output line per input line, in order, written as each batch is done.

    The run, every path and option are checked before input is read; at a terminal each line is
    answered at once. --n-best prints Moses rows (i ||| text ||| score), --align appends Pharaoh
    word alignments (||| 0-0 1-2 ...), --json one object per line. --format text splits each
    line into sentences; --format html translates one HTML page or fragment, keeping its markup;
    srt, docx, pptx, odt, odp and epub translate subtitles, office files and e-books. -i FILE
    picks the format by its extension.
    """
    from tqdm import tqdm

    from mt_cli.cli.decoding import sampling_from

    _check_paths(text, input_file, output_file, attention)
    per_line = {
        "--n-best": n_best > 1,
        "--align": align,
        "--json": as_json,
        "--attention": attention is not None,
    }
    form = input_format(form, input_file, output_file, per_line)
    options = TranslateOptions(
        beam=beam,
        n_best=n_best,
        length_penalty=length_penalty,
        sampling=sampling_from(sample, top_k, top_p, temperature, seed),
        align=align,
        alignment_layer=alignment_layer,
        scores=as_json or n_best > 1,  # only these print a score; greedy search goes faster without
        tgt_lang=tgt_lang,
        src_lang=src_lang,
        placeholders=placeholders,
        glossary_mode=glossary_mode,
    )
    if choice.engine is not EngineKind.MT and attention is not None:
        raise InputError("--attention needs --engine mt")
    if choice.engine is not EngineKind.MT and align:  # before the run's export is made for nothing
        from mt_cli.decode.ctranslate2 import NO_ALIGNMENT

        raise InputError(NO_ALIGNMENT)
    if choice.engine is not EngineKind.MT and glossary_mode is GlossaryMode.GUARANTEE:  # the same
        from mt_cli.decode.protected import NEEDS_MT

        raise InputError(NEEDS_MT)
    if output_file is None:
        standard_stream("stdout")
    if text is None and input_file is None:
        standard_stream("stdin")
    model = choice.open()
    # Resolved here, once, before a line of input is read (one line, nothing written); the API and
    # the engine pass them on as they are.
    options = model.options(options)
    if glossary is not None:
        options = options.with_glossary(_glossary(model, glossary, options))

    if form.file is not None:  # read whole, not in chunks of lines
        translate_whole(model, options, form.file, text, input_file, output_file)
        return
    chunks, total = input_chunks(text, input_file, buffer_size)
    if form.document is not None:
        written = translated_documents(model, options, form.document, chunks)
    else:
        written = _translated_lines(model, options, chunks, as_json, attention)
    output = AtomicTextOutput(output_file) if output_file is not None else None
    sink = output or sys.stdout
    quiet = True if output is None and sys.stdout.isatty() else None  # None: tqdm shows a bar on a terminal
    try:
        with tqdm(total=total, desc="translating", unit="line", leave=False, disable=quiet) as bar:
            for piece, lines in written:
                _write(sink, piece, output_file)
                bar.update(lines)
        if output is not None:
            output.commit()
    finally:
        if output is not None:
            output.discard()


def _glossary(model: Model, path: Path, options: TranslateOptions) -> Glossary:
    """The glossary at ``path`` in the direction ``options`` translate, checked against the model
    before any input is read."""
    from mt_cli.text.glossary import Glossary

    found = Glossary.read(path, options.src_lang or model.engine.src_lang, options.tgt_lang)
    model.engine.check_terms(options.with_glossary(found))
    return found


def _translated_lines(
    model: Model,
    options: TranslateOptions,
    chunks: Iterator[list[str]],
    as_json: bool,
    attention: Path | None,
) -> Iterator[tuple[str, int]]:
    """(the output lines of a chunk, its number of lines) as each chunk is translated, and the
    attention heatmap of the first line once it is."""
    from mt_cli.cli.decoding import translation_lines

    done = 0
    for translations in model.translate_stream(chunks, options):
        lines = translation_lines(translations, done, options.n_best > 1, options.align, as_json)
        yield "".join(line + "\n" for line in lines), len(translations)
        if attention is not None and done == 0:
            _plot_attention(model.engine, translations[0], attention, options.tgt_lang)
        done += len(translations)


def _check_paths(
    text: str | None, input_file: Path | None, output_file: Path | None, attention: Path | None
) -> None:
    """Every path of ``mt translate``, before the run is loaded or a line is read."""
    if text is not None and input_file is not None:
        raise InputError("give either a text argument or --input, not both")
    if input_file is not None:
        check_input_file(input_file, "--input")
        if output_file is not None and output_file.resolve() == input_file.resolve():
            raise InputError(f"--output {output_file} is the --input file; write the translations elsewhere")
    if attention is not None:
        check_output_path(attention, "--attention")
    if output_file is not None:
        check_output_path(output_file, "--output")


def _write(sink: TextIO | AtomicTextOutput, text: str, output_file: Path | None) -> None:
    """``text`` to the output file or stdout; every byte taken before the next batch is decoded."""
    try:
        if isinstance(sink, AtomicTextOutput):
            sink.write(text)
            sink.flush()
        else:
            write_stdout(text)
    except BrokenPipeError:
        raise
    except OSError as err:
        raise RunFailure(f"cannot write {output_file or 'stdout'}: {err.strerror or err}") from None


def _plot_attention(engine: Engine, translation: Translation, path: Path, tgt_lang: str | None) -> None:
    from mt_cli.tools.plots import plot_attention

    plot_attention(*engine.attention(translation.source, translation.best.tokens, None, tgt_lang), path)
    warn(f"attention heatmap written to {path}")


@user_errors
@opens_model
def evaluate(
    bleu: BleuOption = True,
    choice: ModelChoice = DEFAULT_MODEL,
    split: SplitOption = "test2016",
    src: SourceOption = None,
    ref: RefOption = None,
    hyp: HypOption = None,
    beam: BeamOption = None,
    length_penalty: LengthPenaltyOption = None,
    as_json: JsonOption = False,
    output_file: HypothesesOption = None,
    tgt_lang: TgtLangOption = None,
    src_lang: SrcLangOption = None,
) -> None:
    """Score with sacreBLEU (detokenized, cased, 13a) and chrF: a run on a split or files, or --hyp.

    A multilingual model's split is that of the direction --src-lang/--tgt-lang name (default:
    its first); with --src and --ref, --tgt-lang says which language to write."""
    from mt_cli.decode.evaluate import evaluate_run, score_files

    options = TranslateOptions(beam=beam, length_penalty=length_penalty, tgt_lang=tgt_lang, src_lang=src_lang)
    standard_stream("stdout", "the scores are printed there: redirect it to a file")
    if hyp:
        if ref is None or src is not None:
            raise InputError("--hyp needs --ref (and no --src): it scores a file of translations")
        if tgt_lang is not None or src_lang is not None:
            raise InputError("--hyp scores translations someone made: --src-lang and --tgt-lang need a model")
        if len(hyp) > 1:
            from mt_cli.cli.comparison import print_comparison
            from mt_cli.decode.significance import compare_files

            print_comparison(compare_files(hyp, ref), bleu, as_json)
            return
        scores = score_files(hyp[0], ref)
        _print_scores(
            {"data": str(hyp[0]), **scores.as_dict()},
            f"{hyp[0]}: {scores.sentences} sentences",
            bleu,
            as_json,
        )
        return
    output = AtomicTextOutput(output_file) if output_file is not None else None
    try:
        model = choice.open()
        result = evaluate_run(model.engine, split, src, ref, options)
        if output is not None:
            output.write("".join(h + "\n" for h in result.evaluation.hypotheses))
            output.commit()
    finally:
        if output is not None:
            output.discard()
    seconds, sentences = result.evaluation.seconds, result.evaluation.scores.sentences
    name = result.name if result.direction is None else f"{result.name} {'->'.join(result.direction)}"
    header = (
        f"{name}: {sentences} sentences, beam {result.beam}, length penalty {result.length_penalty}, "
        f"{seconds:.1f} s ({sentences / max(seconds, 1e-9):.1f} sentences/s)"
    )
    _print_scores(result.as_dict(), header, bleu, as_json)


def _print_scores(data: dict, header: str, bleu: bool, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    typer.echo(header)
    if bleu:
        typer.echo(f"BLEU = {data['bleu']:.2f}  ({data['bleu_signature']})")
    typer.echo(f"chrF = {data['chrf']:.2f}  ({data['chrf_signature']})")


def register(app: typer.Typer) -> None:
    app.command()(translate)
    app.command("eval")(evaluate)
