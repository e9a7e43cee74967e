"""Training: what ``mt train`` and ``mt prepare`` do around the loop (``run``), whether a run starts or
resumes (``resuming``), the AMP loop (``trainer``) and an update's outcome read without stopping the
device (``outcome``), the precision ``train.amp: auto`` measures on a CPU (``amp``), validation and
closing scores (``validation``), optimizer and schedule (``optim``), progress, metrics and logs
(``progress``), starting from another run's checkpoint (``warm_start``), maybe with fewer layers
(``shrink``), and translating the text of back-translation and distillation corpora, the teachers'
chunks kept as they are done (``backtranslation``), each rank its share of them under torchrun
(``shares``), into the folder written from them (``synthetic_folder``). Imports ``pretrained`` (a
warm start from a published model), ``decode`` and below; no CLI."""
