"""The data stage, one module per step:

- ``corpus``, ``formats``: where text pairs come from (Multi30k, plain files, TSV/JSONL/Parquet, the hub)
- ``synthetic``: the kept pairs of a back-translation or distillation corpus (and the chunks of one
  being translated), read back like any other, less those under its ``min_score``
- ``suggestions``: the database of corrections ``mt serve --suggestions`` writes, read back as pairs;
  ``suggestion_keys``: the keyed hash (and its secret file) it stores API keys as
- ``filters``: which pairs are kept, and the count of what each rule dropped
- ``prepare``, ``prepared``: from a config to the prepared corpus on disk, and reading it;
  ``augment``: what prepare does to the pairs it reads (mixSeq, placeholders, terms)
- ``mixing``: several prepared corpora seen as one, each drawn by its weight
- ``epochs``: the plans of an epoch's batches over whatever pairs a corpus draws (fixed pieces, or
  BPE-dropout's pools)
- ``loader``: the resumable loader that runs a plan in worker processes, from a checkpoint's position
- ``sampler``: token-budget batching (training, validation and translation share it)
- ``dataset``: pairs in memory for validation, and the length rule
- ``batch``: padded batches with their masks
- ``term_weights``: the loss weight of the target pieces that write an annotated term

Imports ``text``, ``config``, ``disk`` and below; never ``runtime.distributed`` (whoever runs
ranks calls data) and never ``model``."""
