"""Text to pieces and back: the SentencePiece models (``pieces``), trained on a bounded sample and
reused only when their settings match (``tokenizer``), an imported Marian model's, whose pieces
are numbered by its vocabulary file (``vocabulary``), the tags before a source (``tags``), a
user's glossary of terms, read and found in sentences (``glossary``), the terms annotated inline
for the model (``terms``), and placeholders hidden behind symbols and put back
(``placeholders``). Imports only ``config``, ``disk``, ``specials`` and ``errors``, and never
torch or ``datasets``; the model never imports it (it sees ids only)."""
