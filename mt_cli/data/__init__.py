"""The data stage: sources of text pairs (``corpus``), encoding and filtering (``prepare``),
the training pairs per epoch (``dataset``), token-budget batches (``sampler``) and padded
batches with masks (``batch``). Imports ``text``, ``checkpoint``, ``config``, ``files`` and
below; never ``runtime.distributed`` (whoever runs ranks calls data) and never ``model``."""
