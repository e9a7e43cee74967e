"""Training: what ``mt train`` and ``mt prepare`` do around the loop (``run``), the AMP loop
(``trainer``), validation and closing scores (``validation``), optimizer and schedule
(``optim``), progress, metrics and logs (``progress``). Imports ``decode`` and below; no CLI."""
