"""The recipe, one wing: its sections (``sections``), reading and writing it (``recipe``), a
trained model's card (``card``), strict types (``schema``) and the rules types cannot express
(``rules``, ``data_rules``). Never imports torch."""
