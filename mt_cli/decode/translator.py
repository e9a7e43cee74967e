"""A trained model (its card, tokenizers and weights) that turns source lines into target lines.

Lines are sorted by length into token-budget batches (little padding, big batches), decoded,
and put back in input order. An empty line gives an empty line; a line longer than the
model's positions is cut, with one warning naming the line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from mt_cli.checkpoint import checkpoint_card, load_checkpoint
from mt_cli.config import ModelCard
from mt_cli.data.batch import pad_sources, source_ids
from mt_cli.data.sampler import fill_batches
from mt_cli.decode.engine import CardEngine, source_pieces
from mt_cli.decode.search import Hypothesis, beam_search, cross_attention, greedy_search
from mt_cli.errors import CheckpointError
from mt_cli.layout import RunDir
from mt_cli.model.transformer import Transformer, build_model
from mt_cli.runtime.device import amp_dtype, autocast, resolve_device
from mt_cli.text.tokenizer import Tokenizer


@dataclass
class Translator(CardEngine):
    model: Transformer
    src_tok: Tokenizer
    tgt_tok: Tokenizer
    card: ModelCard
    device: torch.device
    dtype: torch.dtype | None  # autocast dtype; None = fp32
    checkpoint: Path | None = None  # the file the weights came from, when loaded from a run

    @classmethod
    def from_run(
        cls, run_dir: str | Path, checkpoint: str | None = None, device: str = "auto", amp: str = "auto"
    ) -> Translator:
        run = RunDir(Path(run_dir))
        if not run.root.is_dir():
            raise CheckpointError(
                f"run directory {run.root} does not exist; train one with `mt train --run {run.root}`"
            )
        path = run.find_checkpoint(checkpoint)
        payload = load_checkpoint(path)
        card = checkpoint_card(payload, path)
        src_tok = Tokenizer.load(run.root / card.src_tokenizer, card.data.src_lang)
        tgt_tok = Tokenizer.load(run.root / card.tgt_tokenizer, card.data.tgt_lang)
        target = resolve_device(device)
        model = build_model(card.model, src_tok.vocab_size, tgt_tok.vocab_size)
        try:
            model.load_state_dict(payload["model"])
        except RuntimeError as err:
            raise CheckpointError(
                f"{path} does not match the tokenizers in {run.root} (vocabularies "
                f"{src_tok.vocab_size}/{tgt_tok.vocab_size}): {str(err).splitlines()[0]}"
            ) from None
        return cls.for_inference(model, src_tok, tgt_tok, card, target, amp_dtype(target, amp), path)

    @classmethod
    def for_inference(
        cls,
        model: Transformer,
        src_tok: Tokenizer,
        tgt_tok: Tokenizer,
        card: ModelCard,
        device: torch.device,
        dtype: torch.dtype | None,
        checkpoint: Path | None = None,
    ) -> Translator:
        """A translator that owns ``model``: moved to ``device``, in eval mode, cast to ``dtype``.

        Autocast would re-cast every weight at every decoding step, so for inference the weights
        are cast once (LayerNorm and softmax still accumulate in fp32 inside). `mt eval` and the
        closing test scores of `mt train` both come through here, so they agree on a checkpoint.
        """
        model.to(device).eval()
        if dtype is not None:
            model.to(dtype=dtype)
        return cls(model, src_tok, tgt_tok, card, device, dtype, checkpoint)

    def with_length_penalty(self, alpha: float | None) -> Translator:
        """This translator with ``decode.length_penalty`` set to ``alpha`` (None: the card's)."""
        if alpha is None:
            return self
        decode = dataclasses.replace(self.card.decode, length_penalty=alpha)
        return dataclasses.replace(self, card=dataclasses.replace(self.card, decode=decode))

    def encode_sources(
        self, lines: Sequence[str], warn: Callable[[str], None], first_line: int = 1
    ) -> list[list[int]]:
        """Source ids with EOS, cut to the model's positions (with one warning per cut line,
        numbered from ``first_line``)."""
        encoded = source_pieces(self.src_tok, lines, self.model.max_positions, warn, first_line)
        return [source_ids(ids) for ids in encoded]

    def batches(self, sources: list[list[int]], beam_size: int) -> list[list[int]]:
        """Indices of non-empty sources, sorted by length, packed under ``decode.max_tokens``
        (source tokens times beams)."""
        order = sorted((i for i, ids in enumerate(sources) if len(ids) > 1), key=lambda i: len(sources[i]))
        widths = [len(ids) * beam_size for ids in sources]
        return fill_batches(order, (widths,), self.card.decode.max_tokens)

    def translate(
        self,
        lines: Sequence[str],
        beam_size: int | None = None,
        n_best: int = 1,
        warn: Callable[[str], None] = lambda message: None,
        progress: Callable[[int], None] = lambda lines_done: None,
        first_line: int = 1,
    ) -> list[list[Hypothesis]]:
        """The ``n_best`` hypotheses per line (token ids), in input order.

        ``progress(n)`` is called as lines are done (empty lines first, then each batch);
        ``first_line`` numbers the lines in warnings (for input that arrives in chunks).
        """
        beam = self.card.decode.beam_size if beam_size is None else beam_size
        sources = self.encode_sources(lines, warn, first_line)
        results: list[list[Hypothesis]] = [[Hypothesis([], 0.0)] for _ in sources]
        dec = self.card.decode
        groups = self.batches(sources, beam)
        progress(len(sources) - sum(map(len, groups)))
        for group in groups:
            src, src_mask = pad_sources([sources[i] for i in group])
            src, src_mask = src.to(self.device), src_mask.to(self.device)
            with autocast(self.device, self.dtype):
                if beam == 1 and n_best == 1:
                    outputs = greedy_search(self.model, src, src_mask, dec.max_len_a, dec.max_len_b)
                    found = [[Hypothesis(ids, 0.0)] for ids in outputs]
                else:
                    found = beam_search(
                        self.model,
                        src,
                        src_mask,
                        beam,
                        dec.length_penalty,
                        dec.max_len_a,
                        dec.max_len_b,
                        n_best,
                    )
            for index, hyps in zip(group, found):
                results[index] = hyps
            progress(len(group))
        return results

    def stream(
        self, chunks: Iterable[list[str]], beam_size: int, n_best: int, warn: Callable[[str], None]
    ) -> Iterator[tuple[list[str], list[list[Hypothesis]], list[str]]]:
        """For each chunk of input lines, as soon as it is decoded: (the lines, their hypotheses,
        the output lines). Output is one translation per line, or with ``n_best`` > 1 Moses
        n-best rows ``i ||| text ||| score``, numbered across chunks."""
        done = 0
        for chunk in chunks:
            hyps = self.translate(chunk, beam_size=beam_size, n_best=n_best, warn=warn, first_line=done + 1)
            if n_best == 1:
                out = self.tgt_tok.decode([h[0].tokens for h in hyps])
            else:
                out = [
                    f"{done + i} ||| {text} ||| {h.score:.4f}"
                    for i, line_hyps in enumerate(hyps)
                    for h, text in zip(line_hyps, self.tgt_tok.decode([h.tokens for h in line_hyps]))
                ]
            yield chunk, hyps, out
            done += len(chunk)

    def translate_text(
        self,
        lines: Sequence[str],
        beam_size: int | None = None,
        warn: Callable[[str], None] = lambda message: None,
        progress: Callable[[int], None] = lambda lines_done: None,
    ) -> list[str]:
        """One detokenized line per input line, in order."""
        hyps = self.translate(lines, beam_size=beam_size, warn=warn, progress=progress)
        return self.tgt_tok.decode([h[0].tokens for h in hyps])

    @property
    def origin(self) -> str:
        return str(self.checkpoint) if self.checkpoint is not None else "a model in memory"

    def translate_lines(
        self,
        lines: Sequence[str],
        beam_size: int | None = None,
        length_penalty: float | None = None,
        warn: Callable[[str], None] = lambda message: None,
    ) -> list[str]:
        """The ``Engine`` interface: one translation per line, in order."""
        return self.with_length_penalty(length_penalty).translate_text(lines, beam_size=beam_size, warn=warn)

    def attention(self, line: str, tokens: list[int]) -> tuple[list[str], list[str], torch.Tensor]:
        """Source pieces, target pieces and the (T, S) cross-attention for one translated line."""
        source = self.encode_sources([line], warn=lambda message: None)[0]
        src, src_mask = pad_sources([source])
        with autocast(self.device, self.dtype):
            weights = cross_attention(self.model, src.to(self.device), src_mask.to(self.device), tokens)
        src_pieces = self.src_tok.pieces(line.strip())[: len(source) - 1] + ["</s>"]
        tgt_pieces = [self.tgt_tok.sp.id_to_piece(i) for i in tokens] + ["</s>"]
        return src_pieces, tgt_pieces, weights.cpu()
