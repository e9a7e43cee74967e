"""``--engine ctranslate2``: a model exported by ``mt export --format ctranslate2``, decoded by
CTranslate2 with mt's tokenization, source cut and output length limit, so that its lines equal
``Translator``'s (float32 greedy: token for token).

CTranslate2 caps output length per batch, not per sentence, so sentences are decoded in groups
that share mt's limit (``max_len_a * source length + max_len_b``); CTranslate2 counts the limit
without EOS, mt with it. ``ctranslate2`` (the ``export`` extra) is imported when an engine opens.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from mt_cli.config import ModelCard, card_from_dict
from mt_cli.decode.engine import CardEngine, output_limit, source_pieces
from mt_cli.errors import CheckpointError
from mt_cli.layout import ExportFiles
from mt_cli.text.tokenizer import Tokenizer


class CTranslate2Engine(CardEngine):
    """An exported model: ``Engine`` over ``ctranslate2.Translator``."""

    def __init__(self, model_dir: Path, device: str = "cpu", compute_type: str = "default", threads: int = 0):
        import ctranslate2

        card_path = model_dir / ExportFiles.CARD
        if not card_path.is_file():
            raise CheckpointError(f"{model_dir} is not a CTranslate2 export of mt (no {ExportFiles.CARD})")
        self.card: ModelCard = card_from_dict(json.loads(card_path.read_text(encoding="utf-8")))
        self.model_dir = model_dir
        self.src_tok = Tokenizer.load(model_dir / self.card.src_tokenizer, self.card.data.src_lang)
        self.tgt_tok = Tokenizer.load(model_dir / self.card.tgt_tokenizer, self.card.data.tgt_lang)
        # On a CPU, one thread per batch and as many batches at once as threads: small beam-search
        # batches do not keep two threads busy, two batches side by side do (docs/benchmarks.md).
        on_cpu = device == "cpu" or (device == "auto" and ctranslate2.get_cuda_device_count() == 0)
        self.workers = (threads or os.cpu_count() or 1) if on_cpu else 1
        try:
            self.translator = ctranslate2.Translator(
                str(model_dir),
                device=device,
                compute_type=compute_type,
                inter_threads=self.workers,
                intra_threads=1 if on_cpu else threads,
            )
        except (RuntimeError, ValueError) as err:
            raise CheckpointError(f"CTranslate2 cannot load {model_dir}: {err}") from None

    @property
    def origin(self) -> str:
        return str(self.model_dir)

    @property
    def parallel_batches(self) -> int:
        return self.workers

    def translate_lines(
        self,
        lines: Sequence[str],
        beam_size: int | None = None,
        length_penalty: float | None = None,
        warn: Callable[[str], None] = lambda message: None,
    ) -> list[str]:
        """The ``Engine`` interface: one translation per line, in order."""
        dec = self.card.decode
        beam = dec.beam_size if beam_size is None else beam_size
        alpha = dec.length_penalty if length_penalty is None else length_penalty
        sources = source_pieces(self.src_tok, lines, self.card.model.max_positions, warn)
        outputs: list[list[int]] = [[] for _ in sources]
        # Every group is submitted before any is awaited, so the translator's workers take them
        # side by side (one limit per call: CTranslate2 has one max_decoding_length per batch).
        submitted = [
            (
                group,
                self.translator.translate_batch(
                    [self.src_tok.sp.id_to_piece(sources[i]) for i in group],
                    beam_size=beam,
                    length_penalty=alpha,
                    max_decoding_length=limit - 1,  # CTranslate2 counts words, mt words and EOS
                    max_batch_size=dec.max_tokens // beam,
                    batch_type="tokens",
                    asynchronous=True,
                ),
            )
            for limit, group in self._groups_by_limit(sources).items()
        ]
        for group, results in submitted:
            for index, result in zip(group, results, strict=True):
                outputs[index] = [self.tgt_tok.sp.piece_to_id(p) for p in result.result().hypotheses[0]]
        return self.tgt_tok.decode(outputs)

    def _groups_by_limit(self, sources: list[list[int]]) -> dict[int, list[int]]:
        """Indices of the non-empty sources by their output limit (over 1: room for a word)."""
        dec, positions = self.card.decode, self.card.model.max_positions
        groups: dict[int, list[int]] = defaultdict(list)
        for index, ids in enumerate(sources):
            limit = output_limit(len(ids) + 1, dec.max_len_a, dec.max_len_b, positions)
            if ids and limit > 1:
                groups[limit].append(index)
        return groups
