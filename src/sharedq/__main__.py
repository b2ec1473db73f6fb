"""``python -m sharedq`` runs the CLI."""

from sharedq.cli.main import main

main()
