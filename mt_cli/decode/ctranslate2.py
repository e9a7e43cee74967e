"""``--engine ctranslate2``: a model exported by ``mt export --format ctranslate2``, decoded by
CTranslate2 with mt's tokenization, source cut and output length limit, so that its lines equal
``Translator``'s (float32 greedy: token for token).

CTranslate2 caps output length per batch, not per sentence, so sentences are decoded in groups
that share mt's limit (``max_len_a * source length + max_len_b``); CTranslate2 counts the limit
without EOS, mt with it. ``ctranslate2`` (the ``export`` extra) is imported when an engine opens.
Scores are CTranslate2's own: beam scores use the same length penalty as mt's, forced decoding is
``score_batch``. Sampling is mt's sampler over CTranslate2's logits (``ctranslate2_sampling``),
so that a line's sample depends on the seed and the line only. Alignments are mt's alone: an
export keeps the attention of one head (CTranslate2's default), not the mean over heads.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from mt_cli.config.card import ModelCard, card_from_dict
from mt_cli.config.options import Sampling, TranslateOptions
from mt_cli.decode.ctranslate2_sampling import sample
from mt_cli.decode.engine import CardEngine, Warn
from mt_cli.decode.hypotheses import output_limit
from mt_cli.decode.results import Hypothesis, Translation
from mt_cli.decode.search import run_search
from mt_cli.disk.layout import ExportFiles
from mt_cli.errors import CheckpointError, InputError
from mt_cli.runtime.precision import ComputeType
from mt_cli.specials import NEVER_OUTPUT
from mt_cli.text.tokenizer import Tokenizer, card_tokenizers

if TYPE_CHECKING:
    import ctranslate2

NO_ALIGNMENT = (
    "--align needs --engine mt: a CTranslate2 export gives the attention of one head, "
    "not the mean over heads that mt aligns with"
)


class CTranslate2Engine(CardEngine):
    """An exported model: ``Engine`` over ``ctranslate2.Translator``."""

    def __init__(
        self,
        model_dir: Path,
        device: str = "cpu",
        compute_type: ComputeType | str = ComputeType.DEFAULT,
        threads: int = 0,
        device_index: int = 0,  # which GPU: a torchrun rank's own
    ):
        import ctranslate2

        card_path = model_dir / ExportFiles.CARD
        if not card_path.is_file():
            raise CheckpointError(f"{model_dir} is not a CTranslate2 export of mt (no {ExportFiles.CARD})")
        self.card: ModelCard = card_from_dict(json.loads(card_path.read_text(encoding="utf-8")))
        self.model_dir = model_dir
        self.src_tok, self.tgt_tok = card_tokenizers(self.card, model_dir)
        # On a CPU, one thread per batch and as many batches at once as threads: small beam-search
        # batches do not keep two threads busy, two batches side by side do (docs/benchmarks.md).
        on_cpu = device == "cpu" or (device == "auto" and ctranslate2.get_cuda_device_count() == 0)
        self.workers = (threads or os.cpu_count() or 1) if on_cpu else 1
        try:
            self.translator = ctranslate2.Translator(
                str(model_dir),
                device=device,
                device_index=device_index,
                compute_type=ComputeType(compute_type).value,
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

    def _check_layer(self, layer: int | None) -> None:
        raise InputError(NO_ALIGNMENT)

    def _translated(
        self, lines: Sequence[str], options: TranslateOptions, warn: Warn, first_line: int
    ) -> list[Translation]:
        sources = self.source_pieces(lines, self.max_positions, warn, first_line, options.tgt_lang)
        searches = ExportSearches(
            self.translator,
            self.tgt_tok,
            [self.src_tok.to_pieces(ids) for ids in sources],
            lines,
            self._groups_by_limit(sources),
            self.card.decode.max_tokens,
        )
        return [
            Translation(
                line,
                tuple(
                    Hypothesis(text, tuple(pieces), score)
                    for (pieces, score), text in zip(hyps, self._detokenize([p for p, _ in hyps]))
                ),
            )
            for line, hyps in zip(lines, run_search(options, searches))
        ]

    def _detokenize(self, pieces: list[list[str]]) -> list[str]:
        return self.tgt_tok.decode([self.tgt_tok.to_ids(row) for row in pieces])

    def _groups_by_limit(self, sources: list[list[int]]) -> dict[int, list[int]]:
        """Indices of the non-empty sources by their output limit (over 1: room for a word)."""
        dec, positions = self.card.decode, self.max_positions
        groups: dict[int, list[int]] = defaultdict(list)
        for index, ids in enumerate(sources):
            limit = output_limit(len(ids) + 1, dec.max_len_a, dec.max_len_b, positions)
            if ids and limit > 1:
                groups[limit].append(index)
        return groups

    def _forced(
        self, sources: list[list[int]], targets: list[list[int]]
    ) -> list[tuple[Sequence[str], Sequence[float]]]:
        results = self.translator.score_batch(
            [self.src_tok.to_pieces(ids) for ids in sources],
            [self.tgt_tok.to_pieces(ids) for ids in targets],
            max_batch_size=self.card.decode.max_tokens,
            batch_type="tokens",
        )
        return [(result.tokens, result.log_probs) for result in results]

    def attention(
        self, source: str, target: Sequence[str], layer: int | None = None, tgt_lang: str | None = None
    ) -> NoReturn:
        raise InputError("--attention needs --engine mt: a CTranslate2 export keeps one head's attention")


Pieces = list[tuple[list[str], float]]  # a source's hypotheses: (target pieces, score), best first


@dataclass(frozen=True)
class ExportSearches:
    """CTranslate2's searches (``search.Searches``) over sources given as ``pieces`` (no EOS) of
    ``lines``, decoded in the ``groups`` of sources that share an output limit (``_groups_by_limit``;
    a source in none gives one empty hypothesis), in batches of ``max_tokens``."""

    translator: ctranslate2.Translator
    tgt_tok: Tokenizer
    pieces: list[list[str]]
    lines: Sequence[str]
    groups: dict[int, list[int]]
    max_tokens: int

    def sample(self, sampling: Sampling, alpha: float) -> list[Pieces]:
        found = self._unfound()
        for limit, group in self.groups.items():
            pieces, texts = [self.pieces[i] for i in group], [self.lines[i] for i in group]
            sampled = sample(
                self.translator, self.tgt_tok, pieces, texts, limit, sampling, alpha, self.max_tokens
            )
            for index, hypothesis in zip(group, sampled):
                found[index] = [hypothesis]
        return found

    def beam(self, beam_size: int, n_best: int, alpha: float) -> list[Pieces]:
        """Every group submitted before any is awaited, so that the translator's workers take them
        side by side (one limit per call: CTranslate2 has one max_decoding_length per batch)."""
        submitted = [
            (
                group,
                self.translator.translate_batch(
                    [self.pieces[i] for i in group],
                    beam_size=beam_size,
                    num_hypotheses=n_best,
                    length_penalty=alpha,
                    return_scores=True,
                    max_decoding_length=limit - 1,  # CTranslate2 counts words, mt words and EOS
                    max_batch_size=self.max_tokens // beam_size,
                    batch_type="tokens",
                    # As mt's search (specials.NEVER_OUTPUT): pad and <s> are never a next token.
                    suppress_sequences=[[piece] for piece in self.tgt_tok.to_pieces(NEVER_OUTPUT)],
                    asynchronous=True,
                ),
            )
            for limit, group in self.groups.items()
        ]
        found = self._unfound()
        for group, results in submitted:
            for index, result in zip(group, results, strict=True):
                found[index] = list(zip(result.result().hypotheses, result.result().scores))
        return found

    def greedy(self, alpha: float, scored: bool) -> list[Pieces]:
        """Beam search of beam 1, as CTranslate2 searches greedily (always scored)."""
        return self.beam(1, 1, alpha)

    def _unfound(self) -> list[Pieces]:
        return [[([], 0.0)] for _ in self.pieces]
