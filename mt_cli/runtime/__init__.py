"""Where and how computation runs: the device and its dtypes (``device``), the names of the
precisions and the one mapping from ``train.amp`` to them (``precision``), a device's peak
FLOP/s (``flops``), DDP plumbing (``distributed``), glibc's malloc kept from handing
decoding's memory back between steps (``allocator``). Imports only ``errors``; everything that
trains or decodes may import it, except that ``data`` never imports ``distributed``."""
