"""The special token ids every part of mt agrees on, with no import at all.

The tokenizers are trained to put them here (``text.tokenizer`` checks it on load); the model,
batches and decoding use them without knowing SentencePiece exists. Word pieces start at
``FIRST_WORD_ID``.
"""

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
FIRST_WORD_ID = 4
