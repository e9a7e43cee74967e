"""Files on disk, one wing: the run directory's names (``layout``), atomic writes (``files``),
reading text files (``reading``), the run lock (``runlock``) and the files mt ships
(``resources``). Never imports torch."""
