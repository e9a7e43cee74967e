"""From a trained model to translations and scores: the one engine interface (``engine``),
which takes ``config.options.TranslateOptions``, and its typed results (``results``); greedy and
beam search (``search``), sampling (``sampling``), forced decoding (``scoring``), ensembles
(``ensemble``, ``members``) and alignments (``alignment``); mt's engine (``translator``) and
CTranslate2's (``ctranslate2``); sacreBLEU and chrF (``evaluate``). Reads a model's card, never
its training recipe. Imports ``model``, ``data`` and below; never ``train``."""
