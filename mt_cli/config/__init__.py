"""The recipe, one wing: its sections (``sections``), reading and writing it (``recipe``), a
trained model's card (``card``), strict types (``schema``), the rules types cannot express
(``rules``, ``data_rules``), the decoding options every caller builds (``options``) and the old
spellings of keys, read into today's (``legacy``). Never imports torch."""
