"""The network: attention layers on scaled_dot_product_attention (``layers``), the decoder's KV
cache (``cache``), dropout kinds (``dropout``), the Transformer with its tied output
(``transformer``) and the token loss (``loss``). Imports ``config``, ``specials`` and ``errors``
only: no tokenizer, corpus or batch, and no sentencepiece."""
