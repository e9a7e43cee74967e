"""Published models in: a Hugging Face Marian (OPUS-MT) checkpoint as mt's own model, never a
wrapper around another library's. ``marian`` converts (config and weights in, a ``Transformer``
out) through three small steps: ``marian_config`` (config.json -> ``ModelConfig``, refusing in one
line what mt cannot represent), ``marian_vocab`` (Marian's ids -> mt's special-id layout) and
``marian_weights`` (the state dict, tensor by tensor). Imports ``model`` and ``config``; sits
above ``decode`` so that writing a whole run directory (card, tokenizers, weights) can join it."""
