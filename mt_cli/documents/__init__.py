"""Documents, not lines: text split into sentences, HTML with its markup kept, each put back
together from the translations of its sentences. Beside the engine, never inside it: the engine
sees sentences, and ``cli`` (``mt translate --format``), ``api`` (``Model.translate_documents``)
and ``serve`` (``format`` in /translate) share this wing, as the file translator will.

``formats`` names the formats and reads many documents for one batch; ``document`` holds what
every format reads into (sentences to translate, everything else kept as written) and puts it
back; ``sentences`` finds sentence boundaries (sentencex, the ``documents`` extra); ``plain``
reads plain text, line by line; ``pages`` reads HTML, whose tokens come from ``markup`` and whose
markup inside a sentence ``inline`` puts into the translation. Imports ``errors`` only.
"""
