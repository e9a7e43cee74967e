"""A trained run out of mt: CTranslate2 (``ctranslate2``, its weight types in ``quantization``;
a run's own export for ``--engine ctranslate2`` in ``runs``), Hugging Face Marian (``huggingface``,
its tokenizer files and README in ``marian_files``) and Argos Translate packages (``argos``, with
a sentence splitter from ``sentences``). Each reads a run as ``trained.load_trained`` gives it
(card, tokenizers and fp32 weights: no decoder) and writes a directory another engine loads; none
changes the run. Imports ``trained`` and below; ``ctranslate2`` and ``transformers`` (the ``export``
extra) are imported inside the functions that need them."""
