"""Beside the core, never imported by it: ``mt bench`` against the textbook ``nn.Transformer``
(``bench``, ``textbook``, its timing and report in ``timing``), ``mt bench --engines`` (every
engine's rows: ``engines``) and figures (``plots``). May import every wing but ``cli`` and ``api``."""
