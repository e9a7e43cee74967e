"""A trained run out of mt: CTranslate2 (``ctranslate2``), Hugging Face Marian (``huggingface``)
and Argos Translate packages (``argos``). Each reads a run as ``trained.load_trained`` gives it
(card, tokenizers and fp32 weights: no decoder) and writes a directory another engine loads; none
changes the run. Imports ``trained`` and below; ``ctranslate2`` and ``transformers`` (the ``export``
extra) are imported inside the functions that need them."""
