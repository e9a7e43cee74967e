"""``mt serve``: the LibreTranslate HTTP API over any ``decode.engine.Engine``, with concurrent
requests micro-batched under a bounded queue. Imports ``decode`` and below; fastapi and uvicorn
(the ``serve`` extra) only here."""
