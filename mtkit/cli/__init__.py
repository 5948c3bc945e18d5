"""The `mtkit` command line: thin typer commands, one module per command group.

`app` (mtkit/cli/app.py) holds the root options and error handling; importing a command
module registers its commands on it, in the order `mtkit --help` lists them.
"""

# Importing a command module registers its commands; this order is the order of `mtkit --help`.
from mtkit.cli import data, clean, train, distill, decode, calibrate, score, export, serve, plot, info  # noqa: F401, I001
from mtkit.cli.app import app, main  # noqa: I001

__all__ = ["app", "main"]
