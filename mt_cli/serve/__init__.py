"""``mt serve``: the LibreTranslate HTTP API over any ``decode.engine.Engine``, every request's
sentences pooled and decoded by whichever decoder is free.

``app`` holds the FastAPI endpoints and ``settings`` what the command's options set (and their
defaults); ``errors`` has the refusal every route raises (``ApiError``) and ``scope`` what the
server translates and what a request may send; ``body`` reads a request's body under the size and
time limits, ``parse`` reads JSON and form fields into a checked request, ``request`` is a
/translate request (its texts read as documents: plain text or HTML, by the ``documents`` wing) and
its answer, ``job`` runs one request's documents through detection, decoding and back for /translate
and /translate_file alike, ``alternatives`` makes LibreTranslate's n-best alternatives, ``detect``
tells a text's language (``/detect``, ``source: "auto"``), ``access`` is the one dependency that
checks a request's API key and limits (requests a minute, characters), each key's own read from the
``--api-keys`` file by ``keys``, ``metrics`` answers ``/metrics`` (``--metrics``: Prometheus),
``suggestions`` stores /suggest's corrections in the suggestions database on one writer thread,
``files`` answers /translate_file (a file read by the ``documents`` wing) and keeps the translated
files until their download, ``batcher`` hands each free decoder a batch from ``pool``, the sentences of
concurrent requests waiting, ``cache`` answers repeated sentences, ``decoders`` is what a batch is decoded
on (in-process) and ``workers`` mt's engine in worker processes, one per core, ``handlers`` answers
every error as ``{"error": ...}`` with its status and ``server`` runs uvicorn on the listening
socket. Imports ``documents``, ``decode`` and below; fastapi, uvicorn, lingua and prometheus_client
(the ``serve`` extra) only here."""
