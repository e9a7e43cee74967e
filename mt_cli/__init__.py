"""mt: train, run and score a Transformer for German-English translation."""

__version__ = "0.1.0"
