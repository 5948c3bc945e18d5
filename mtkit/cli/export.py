"""`mtkit export`: a trained model in another engine's format (CTranslate2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from mtkit.cli.app import app, err, setup_logging
from mtkit.cli.options import build, config_options
from mtkit.config import ExportConfig


@app.command()
@config_options(ExportConfig)
def export(
    model: str = typer.Argument(..., help="An mtkit model or checkpoint file (e.g. averaged.pt).", show_default=False),
    output: Path = typer.Option(
        ...,
        "--output",
        "-o",
        show_default=False,
        help="The directory to write; an existing one is replaced only if mtkit wrote it.",
    ),
    *,
    given: dict[str, Any],
) -> None:
    """Export a model to CTranslate2 (needs the extra: pip install 'mtkit\\[ct2]').

    Example: mtkit export runs/small/averaged.pt --format ctranslate2 --quantization int8 -o runs/small/ct2

    Tokenize with DIR/spm.model into pieces; ctranslate2.Translator(DIR) appends EOS and starts from <s> itself.
    """
    import logging

    from mtkit.export import export as run_export

    setup_logging(logging.WARNING)  # the one line below says what was written
    config = build(ExportConfig(), given)
    out = run_export(model, output, config)
    err.print(f"mtkit: wrote {escape(str(out))} ({config.format}, {config.quantization}).")
