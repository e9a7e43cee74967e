"""Documents, not lines: text split into sentences, HTML with its markup kept, subtitles, and
office files and e-books with everything but their text kept, each put back together from the
translations of its sentences. Beside the engine, never inside it: the engine sees sentences, and
``cli`` (``mt translate --format``, ``-i FILE``), ``api`` (``Model.translate_documents``,
``translate_file``) and ``serve`` (``format`` in /translate, /translate_file) share this wing.

``formats`` names the text formats and reads many documents for one batch; ``document`` holds
what every text format reads into (sentences to translate, everything else kept as written) and
puts it back; ``sentences`` finds sentence boundaries (sentencex, the ``documents`` extra);
``plain`` reads plain text, line by line; ``pages`` reads HTML, whose tokens come from ``markup``
and whose markup inside a sentence ``inline`` puts into the translation; ``subtitles`` reads
SubRip (.srt) cues. The zip packages are read by ``packages`` (a zip and its XML checked against
hostile files, members rewritten; lxml, the ``documents`` extra), their paragraphs' sentences
found across runs and put back by ``runs``: ``wordfiles`` reads .docx files and ``slides`` .pptx
ones, both Office Open XML packages whose parts ``office`` finds; ``opendocument`` reads .odt and
.odp files, ``ebooks`` .epub ones. ``filetypes`` names the file formats by extension and reads a
file's bytes in its format. Imports ``disk`` (a text file's UTF-8) and ``errors`` only.
"""
