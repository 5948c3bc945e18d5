"""`mtkit info`: what a model, a checkpoint or a run directory is (mtkit/info.py gathers it)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from mtkit.cli.app import app
from mtkit.cli.options import revision_option


@app.command()
def info(
    path: Path = typer.Argument(
        ...,
        metavar="FILE|RUN",
        show_default=False,
        help="A model or checkpoint file, or a run directory (the --out of `mtkit train`).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print everything as one JSON object instead of text."),
    revision: Optional[str] = revision_option(),
) -> None:
    """Describe a model, checkpoint or run: architecture, parameters, vocabulary, step, best scores, provenance.

    Example: mtkit info runs/small
    """
    import json

    from mtkit.info import describe, render

    described = describe(path, revision)  # a Hugging Face Hub name too (mtkit/sources/)
    typer.echo(
        json.dumps(described, indent=1, ensure_ascii=False, default=str) if as_json else render(described), nl=as_json
    )
