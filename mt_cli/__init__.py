"""mt: train, run and score a Transformer for German-English translation.

The package has one wing per stage, and imports go one way, downwards (checked in CI by
import-linter, the contracts in pyproject.toml):

    cli                      the Typer commands: parse arguments, call one function, print
    tools                    mt bench, the textbook baseline, plots: beside the core, never imported by it
    train                    the run directory around the loop, the AMP loop, validation, schedule
    decode                   search, the translator (lines in, lines out), sacreBLEU scoring
    model | data             the network and its loss | corpus -> encoded pairs -> batches
    text | checkpoint        the SentencePiece models | saving, loading and averaging checkpoints
    config | runtime         recipes and a trained model's card | device, precision, DDP
    rules | schema | files | resources | layout
                             config checks, strict YAML, atomic files, shipped files, file names
    specials | errors        the special token ids | errors a person can fix

Two rules beyond the layers: ``model`` never imports ``text``, ``data`` or sentencepiece (it
sees ids only), and ``data`` never imports ``runtime.distributed`` (whoever runs several
processes calls data, not the other way round). Inference reads a model's card, never its
training recipe. Heavy imports (datasets, matplotlib) happen inside the functions that need them.
"""

__version__ = "0.1.0"
