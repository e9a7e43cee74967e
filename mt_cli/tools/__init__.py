"""Beside the core, never imported by it: ``mt bench`` against the textbook ``nn.Transformer``
(``bench``, ``textbook``) and figures (``plots``). May import every wing but ``cli``."""
