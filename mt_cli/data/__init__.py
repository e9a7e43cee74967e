"""The data stage: sources of text pairs (``corpus``, ``formats``), which pairs are kept
(``filters``), the prepared corpus on disk (``prepare``, ``prepared``), several corpora drawn by
weight (``mixing``), each epoch's batches (``epochs``), token-budget batching (``sampler``),
pairs in memory for validation (``dataset``) and padded batches with masks (``batch``). Imports
``text``, ``config``, ``layout``, ``files`` and below; never ``runtime.distributed`` (whoever
runs ranks calls data) and never ``model``."""
