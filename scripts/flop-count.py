# Run from the repository root (RUN_DIR: a trained run):
#   python scripts/flop-count.py RUN_DIR
"""Multiply-adds in the linear layers: our greedy and beam search against the naive loop (docs/benchmarks.md).

Counts what each decoder multiplies on test2016 (the copy in data/multi30k) with the run's
best.pt. Ours: from the batches and rows our searches actually ran (hooks on ``encode`` and
``step``). The naive loop
(``textbook.naive_greedy_batch``): batches of 128 in input order, each run to its longest
output, the whole decoder (with the cross-attention keys/values of the memory) on the prefix at
every step and the output layer on the last position. Attention scores and softmax are left
out (a few percent at these lengths).
"""

import gzip
import sys
from pathlib import Path

from mt_cli.config.options import TranslateOptions
from mt_cli.decode.translator import Translator
from mt_cli.trained import load_trained

NAIVE_BATCH = 128
translator = Translator.of(load_trained(sys.argv[1]), "cpu")
path = Path("data/multi30k/test_2016_flickr.de.gz")
lines = [line.rstrip("\n") for line in gzip.open(path, "rt", encoding="utf-8")]
model = translator.model
d, ff, vocab = model.d_model, translator.card.model.d_ff, model.tgt_vocab_size
enc_layers, layers = len(model.encoder), len(model.decoder)
decoder_position = 4 * d * d + 2 * d * d + 2 * d * ff  # self q/k/v/out, cross q/out, feed-forward
cross_kv = 2 * d * d  # per source position and decoder layer
encoder_position = 4 * d * d + 2 * d * ff


def ours(beam: int) -> tuple[float, float, list[int]]:
    """(encoder, decoder) multiply-adds of one pass over test2016, and output lengths with EOS."""
    rows, encoded = [], []
    step, encode = model.step, model.encode
    model.step = lambda tokens, cache, *a, **k: (rows.append(tokens.numel()), step(tokens, cache, *a, **k))[1]
    model.encode = lambda src, mask: (encoded.append(tuple(src.shape)), encode(src, mask))[1]
    try:
        hyps = translator.translate(lines, TranslateOptions(beam=beam))
    finally:
        model.step, model.encode = step, encode
    encoder = sum(b * s for b, s in encoded) * (enc_layers * encoder_position + layers * cross_kv)
    decoder = sum(rows) * (layers * decoder_position + d * vocab)
    print(
        f"ours, beam {beam}: {len(rows)} steps, {sum(rows):,} decoder rows x steps, encoder batches {encoded}"
    )
    return encoder, decoder, [len(t.best.tokens) + 1 for t in hyps]


greedy_enc, greedy_dec, outputs = ours(1)
beam_enc, beam_dec, _ = ours(5)
sources = translator.encode_sources(lines, warn=lambda message: None)
naive = 0
for start in range(0, len(sources), NAIVE_BATCH):
    batch = sources[start : start + NAIVE_BATCH]
    width, steps = max(map(len, batch)), max(outputs[start : start + NAIVE_BATCH])
    naive += len(batch) * width * enc_layers * encoder_position
    for t in range(1, steps + 1):
        naive += len(batch) * (t * layers * decoder_position + width * layers * cross_kv + d * vocab)
greedy, beam = greedy_enc + greedy_dec, beam_enc + beam_dec
print(f"generated tokens (greedy, EOS included): {sum(outputs):,}")
print(
    f"multiply-adds (G): greedy {greedy / 1e9:.1f} (encoder {greedy_enc / 1e9:.1f}), "
    f"beam 5 {beam / 1e9:.1f} (encoder {beam_enc / 1e9:.1f}), naive {naive / 1e9:.1f}"
)
print(f"naive / greedy {naive / greedy:.2f}x, beam 5 / greedy {beam / greedy:.2f}x")
