"""The `mtkit` command line: thin typer commands that turn options into configs and call the library.

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

PENDING = dict(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})


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


def _not_yet(command: str) -> None:
    raise MtkitError(f"`mtkit {command}` is not available in mtkit {__version__} yet.")


@app.command(**PENDING)
def prepare() -> None:
    """Fetch, extract and clean a named corpus into DIR/raw.

    Example: mtkit prepare multi30k-en-de --mirror ../shared/data/multi30k-en-de
    """
    _not_yet("prepare")


@app.command(**PENDING)
def bpe() -> None:
    """Learn a joint SentencePiece BPE vocabulary and binarize every split.

    Example: mtkit bpe data/multi30k-en-de --vocab-size 8000
    """
    _not_yet("bpe")


@app.command(**PENDING)
def train() -> None:
    """Train a Transformer on binarized data, the way section 5 of the paper does.

    Example: mtkit train data/multi30k-en-de --preset small --out runs/small
    """
    _not_yet("train")


@app.command(**PENDING)
def average() -> None:
    """Average the parameters of the last N checkpoints of a run into one model file.

    Example: mtkit average runs/small --last 5
    """
    _not_yet("average")


@app.command(**PENDING)
def translate() -> None:
    """Translate raw text, one sentence a line, with beam search.

    Example: mtkit translate -m runs/small/averaged.pt < test.en > test.hyp.de
    """
    _not_yet("translate")


@app.command(**PENDING)
def score() -> None:
    """Score translations against references: sacreBLEU, chrF, TER, tokenized BLEU.

    Example: mtkit score test.hyp.de --ref test.de
    """
    _not_yet("score")


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
