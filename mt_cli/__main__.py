from mt_cli.cli import main

main()
