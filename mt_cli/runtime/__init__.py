"""Where and how computation runs: the device and precision (``device``), DDP plumbing
(``distributed``). Imports only ``errors``; everything that trains or decodes may import it,
except that ``data`` never imports ``distributed``."""
