"""Text to pieces and back: the SentencePiece models (``tokenizer``), trained on a bounded sample
and reused only when their settings match. Imports ``config``, ``files``, ``specials`` and
``errors``; the model never imports it (it sees ids only)."""
