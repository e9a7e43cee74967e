"""A run's CTranslate2 export for ``--engine ctranslate2``, made on first use and kept in the run.

The export is named by the checkpoint's content hash (``RUN/exports/ctranslate2-HASH``), so a
checkpoint that changes (training resumed, ``mt average``) gets a new export and a stale one is
never used; the engine opens without loading the PyTorch model once the export exists.
"""

from __future__ import annotations

from pathlib import Path

from mt_cli.disk.files import file_sha256, unwritable, writing
from mt_cli.disk.layout import ExportFiles, RunDir
from mt_cli.errors import InputError
from mt_cli.export.ctranslate2 import Quantization, export_ctranslate2
from mt_cli.trained import load_trained


def ctranslate2_model_dir(run: Path, checkpoint: str | None, log=lambda message: None) -> Path:
    """The CTranslate2 model for a run's checkpoint (float32, quantized at load if asked), or
    ``run`` itself when it is already an export."""
    if (run / ExportFiles.CARD).is_file():
        return run
    rundir = RunDir(run).existing()
    path = rundir.find_checkpoint(checkpoint)
    model_dir = rundir.engine_export(file_sha256(path))
    if not model_dir.is_dir():
        _check_writable(rundir)
        log(f"exporting {path} to {model_dir}")
        with writing(model_dir):
            model_dir.parent.mkdir(exist_ok=True)
        export_ctranslate2(load_trained(run, str(path)), model_dir, Quantization.FLOAT32)
    return model_dir


def _check_writable(rundir: RunDir) -> None:
    """InputError before any work if the export cannot be kept in the run (a read-only copy)."""
    run, exports = rundir.root, rundir.exports
    reason = unwritable(exports if exports.is_dir() else run)
    if reason is not None:
        raise InputError(
            f"--engine ctranslate2 keeps its export of the checkpoint in {exports}, and run directory "
            f"{run} is not writable ({reason}); export it elsewhere with `mt export -f ctranslate2 "
            f"--run {run} -o DIR` and pass --run DIR"
        )
