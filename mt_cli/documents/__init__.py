"""Documents, not lines: text split into sentences, HTML with its markup kept, subtitles and Word
files with everything but their text kept, each put back together from the translations of its
sentences. Beside the engine, never inside it: the engine sees sentences, and ``cli`` (``mt
translate --format``, ``-i FILE``), ``api`` (``Model.translate_documents``, ``translate_file``)
and ``serve`` (``format`` in /translate, /translate_file) share this wing.

``formats`` names the text formats and reads many documents for one batch; ``document`` holds
what every text format reads into (sentences to translate, everything else kept as written) and
puts it back; ``sentences`` finds sentence boundaries (sentencex, the ``documents`` extra);
``plain`` reads plain text, line by line; ``pages`` reads HTML, whose tokens come from ``markup``
and whose markup inside a sentence ``inline`` puts into the translation; ``subtitles`` reads
SubRip (.srt) cues; ``wordfiles`` reads and rebuilds .docx files (python-docx, the ``documents``
extra); ``filetypes`` names the file formats by extension and reads a file's bytes in its format.
Imports ``disk`` (the fixed date of a rebuilt .docx's members) and ``errors`` only.
"""
