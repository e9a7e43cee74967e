"""``python -m mt_cli``: the ``mt`` command (how ``torchrun ... -m mt_cli train`` starts it)."""

from mt_cli.cli import main

main()
