"""From a trained model to translations and scores: greedy and beam search (``search``), the
translator that turns lines into lines (``translator``), sacreBLEU and chrF (``evaluate``).
Reads a model's card, never its training recipe. Imports ``model``, ``data`` and below;
never ``train``."""
