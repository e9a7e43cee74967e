"""Published models in: a Hugging Face Marian (OPUS-MT) checkpoint as mt's own model and run, never
a wrapper around another library's.

``source`` finds the files (``hf:OWNER/NAME[@REVISION]`` through huggingface_hub's cache, or a
directory), ``saved`` reads and checks them (config, weights, MarianTokenizer's files), ``marian``
converts config and weights into a ``Transformer`` through three small steps: ``marian_config``
(config.json -> ``ModelConfig``, refusing in one line what mt cannot represent), ``marian_vocab``
(Marian's ids -> mt's special-id layout, and the pieces by mt id) and ``marian_weights`` (the state
dict, tensor by tensor), after ``marian_checks`` has checked the weights against the config.
``importing`` puts it together: the model converted in memory (what a warm start from a published
model takes) or written as a run directory (``mt import``). The run's translations equal
transformers' ``generate`` and MarianTokenizer's ``batch_decode`` on the same model in float32 (its
tokenizer decodes as MarianTokenizer does, ``text.vocabulary``); in bf16 outputs can differ.
Imports only ``model``, ``text``, ``checkpoint``, ``config``, ``disk``, ``specials`` and ``errors``: it sits
above ``decode``, ``trained`` and ``data`` and imports none of them.
"""
