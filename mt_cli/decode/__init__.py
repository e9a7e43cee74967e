"""From a trained model to translations and scores: the one engine interface (``engine``), which
takes ``config.options.TranslateOptions``, and its typed results (``results``); the user's
placeholders and glossary around any engine (``protected``); the choice of search for every
engine and beam search (``search``), constrained beam search (``constrained``), greedy search's
loop (``picking``), with what every search shares (``hypotheses``: the decoder protocol, the
length rules), sampling (``sampling``), forced decoding (``scoring``), ensembles (``ensemble``,
``members``) and alignments (``alignment``); mt's engine (``translator``, its batches side by
side in ``processes``) and CTranslate2's (``ctranslate2``, sampling over its logits in
``ctranslate2_sampling``); sacreBLEU and chrF (``evaluate``) and paired significance
(``significance``). Loads a model through ``trained`` and reads its card, never its training
recipe. Imports ``trained``, ``model``, ``data`` and below; never ``train``."""
