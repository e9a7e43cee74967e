"""``mt serve``: the LibreTranslate HTTP API over any ``decode.engine.Engine``, with concurrent
requests micro-batched under a bounded queue.

``app`` holds the FastAPI endpoints and ``settings`` what the command's options set (and their
defaults); ``body`` reads a request's body under the size and time limits, ``parse`` reads JSON and
form fields into a checked request, ``request`` turns a /translate request into sentences (its
texts read as documents: plain text or HTML, by the ``documents`` wing) and options, and its answer
back, ``alternatives`` makes LibreTranslate's n-best alternatives, ``detect`` tells a text's
language (``/detect``, ``source: "auto"``), ``suggestions`` stores /suggest's corrections in the
suggestions database on one writer thread, ``files`` answers /translate_file (a .txt, .html, .srt,
.docx, .pptx, .odt, .odp or .epub file read by the ``documents`` wing) and keeps the translated
files until their download, ``batcher`` decodes concurrent requests together, ``handlers`` answers
every error as ``{"error": ...}`` with its status and ``server`` runs uvicorn on the listening
socket. Imports ``documents``, ``decode`` and below; fastapi, uvicorn and lingua (the ``serve``
extra) only here."""
