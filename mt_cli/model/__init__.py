"""The network: multi-head attention on scaled_dot_product_attention (``attention``), the
encoder and decoder layers and positions (``layers``), the decoder's KV cache (``cache``), dropout
kinds (``dropout``), the Transformer with its tied output and the options published checkpoints
need (``transformer``), the token loss (``loss``), a training step's FLOPs (``flops``) and the
linear layers whose weights inference on the CPU packs once for oneDNN (``packed``). Imports
``config``, ``specials`` and ``errors`` only: no tokenizer, corpus or batch, and no sentencepiece."""
