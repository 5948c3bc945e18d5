"""`mtkit export`: a trained model in another engine's format (CTranslate2, Hugging Face Transformers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from mtkit.cli.app import app, err, setup_logging
from mtkit.cli.options import build, config_options, revision_option
from mtkit.config import ExportConfig


@app.command()
@config_options(ExportConfig)
def export(
    model: str = typer.Argument(
        ...,
        help="An mtkit model or checkpoint file (e.g. averaged.pt), a Marian directory or a Hub name.",
        show_default=False,
    ),
    output: Path = typer.Option(
        ...,
        "--output",
        "-o",
        show_default=False,
        help="The directory to write: a new or empty one, or an earlier export (its files are replaced, "
        "files you added are kept).",
    ),
    revision: Optional[str] = revision_option(),
    *,
    given: dict[str, Any],
) -> None:
    """Export a model to CTranslate2 (pip install 'mtkit\\[ct2]') or Transformers (pip install 'mtkit\\[hf]').

    Example: mtkit export runs/small/averaged.pt --format ctranslate2 --quantization int8 -o runs/small/ct2

    Example: mtkit export runs/small/averaged.pt --format huggingface -o runs/small/hf

    CTranslate2: tokenize with DIR/spm.model into pieces; ctranslate2.Translator(DIR) appends EOS and starts from
    <s> itself. Hugging Face: AutoTokenizer and AutoModelForSeq2SeqLM.from_pretrained(DIR); DIR/README.md is
    the model card, generation_config.json holds mtkit's beam settings.
    """
    import logging

    from mtkit.export import export as run_export

    setup_logging(logging.WARNING)  # the one line below says what was written
    config = build(ExportConfig(), given)
    out = run_export(model, output, config, revision)  # a Hugging Face Hub name too (mtkit/sources/)
    err.print(f"mtkit: wrote {escape(str(out))} ({config.format}, {config.quantization}).")
