"""The facts about tokens every part of mt agrees on, with no import but ``re``: the special ids,
SentencePiece's special pieces and word marker, and the tags that go before a source.

The tokenizers are trained to put the specials at these ids (``text.tokenizer`` checks it on
load); the model, batches and decoding use the ids without knowing SentencePiece exists. Word
pieces start at ``FIRST_WORD_ID``.
"""

import re

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
FIRST_WORD_ID = 4
# Never a next token: a model mt trained gives them next to no probability, but an imported Marian
# model has Marian's pad (its decoder start) at both, and Marian's generate bans pad.
NEVER_OUTPUT = [PAD_ID, BOS_ID]

SPECIAL_PIECES = ("<pad>", "<unk>", "<s>", "</s>")  # the pieces of the ids above, in order
EOS_PIECE = SPECIAL_PIECES[EOS_ID]
WORD_START = "\u2581"  # SentencePiece's "▁": the piece begins a new word
TAG_PATTERN = re.compile(r"<[^<>\s]+>")  # a tag (a corpus's "<bt>", a target's "<2en>") is one piece


def target_tag(lang: str) -> str:
    """The tag that tells a multilingual model which language to write (Johnson et al. 2017)."""
    return f"<2{lang}>"
