"""``mt import``: a published Hugging Face Marian (OPUS-MT) model as an mt run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mt_cli.cli.common import log, user_errors


@user_errors
def import_model(
    source: Annotated[
        str,
        typer.Argument(
            metavar="SOURCE",
            help="hf:OWNER/NAME[@REVISION] (fetched into the Hugging Face cache; HF_HUB_OFFLINE=1 uses the "
            "cache alone), or a directory transformers saved a Marian model in (mt's own export too).",
        ),
    ],
    run: Annotated[
        Path,
        typer.Option("--run", "-r", "--run-dir", help="The new run directory (must not exist, or be empty)."),
    ],
    src: Annotated[
        str | None,
        typer.Option("--src", help="Source language (default: tokenizer_config.json's source_lang)."),
    ] = None,
    tgt: Annotated[
        str | None,
        typer.Option(
            "--tgt",
            help="Target language (default: tokenizer_config.json's target_lang or, for a "
            "multilingual model, its first >>xx<< code).",
        ),
    ] = None,
) -> None:
    """Import a Marian model as an mt run: translate, eval, serve, export and fine-tune it like any run.

    Exit codes: 2 for a source mt cannot import (a missing or corrupt file, another model type,
    weights or a tokenizer that do not fit the config, NaN weights) or a --run that cannot be
    written (checked first), 3 when the hub is unreachable or does not answer in time
    (HF_HUB_ETAG_TIMEOUT) and the model is not in the cache. A failed import leaves no run
    directory. In float32 the run translates as transformers' generate does; in bf16 outputs can
    differ.
    """
    from mt_cli.pretrained.importing import import_model as run_import

    done = run_import(source, run, src, tgt)
    parent, m = done.parent, done.config.model
    directions = ", ".join(f"{s} -> {t}" for s, t in done.config.data.directions())
    log(
        f"imported {parent.run}{f'@{parent.revision}' if parent.revision else ''} "
        f"({parent.checkpoint}, sha256 {parent.sha256[:12]}): {done.parameters / 1e6:.1f}M parameters, "
        f"{m.encoder_layers}+{m.decoder_layers} layers, d_model {m.d_model}, {directions}"
    )
    typer.echo(f"run: {run}")


def register(app: typer.Typer) -> None:
    app.command("import")(import_model)
