"""The `mtkit` typer app and its entry point: one place for the root options, logging and error handling.

Heavy imports (torch, sentencepiece, sacrebleu) happen inside the commands so that
`mtkit --help` answers at once. Errors of type MtkitError become one red line on stderr
and exit code 1; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from mtkit import __version__
from mtkit.errors import MtkitError

err = Console(stderr=True, highlight=False, soft_wrap=True)

app = typer.Typer(
    name="mtkit",
    help="Machine translation with the Transformer of 'Attention Is All You Need': "
    "prepare -> bpe -> train -> average -> translate -> score.",
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mtkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True,
                                           help="Print the version and exit."),
) -> None:
    """mtkit: from a named parallel corpus to a trained Transformer and scored translations."""


def setup_logging(level: int) -> None:
    """One log format for every command, on stderr; under torchrun, ranks other than 0 only warn."""
    import logging
    import os

    rank = int(os.environ.get("RANK", "0"))
    logging.basicConfig(level=level if rank == 0 else max(level, logging.WARNING), stream=sys.stderr,
                        format=f"%(asctime)s{f' [rank {rank}]' if rank else ''} | %(levelname)s | %(message)s",
                        datefmt="%H:%M:%S")


def log(message: str) -> None:
    err.print(f"[dim]{escape(message)}[/]")


def main() -> None:
    """Console entry point: user mistakes become one red sentence and a non-zero exit.

    typer's standalone mode already turns usage errors into its own message and exit 2;
    MtkitError passes through it and is reported here.
    """
    try:
        app()
    except MtkitError as exc:
        err.print(f"[bold red]mtkit: error:[/] {escape(str(exc))}")
        sys.exit(1)
    except BrokenPipeError:  # e.g. `mtkit translate ... | head`: not an error
        sys.stderr.close()
        sys.exit(0)
