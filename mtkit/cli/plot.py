"""`mtkit plot`: the learning curves of runs as one image (mtkit/plot.py draws them)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Literal, Optional

import typer
from rich.markup import escape

from mtkit.cli.app import app, err, setup_logging
from mtkit.plot import DEFAULT_SERIES, SERIES, X_AXES

XAxis = Literal[X_AXES]  # type: ignore[valid-type]
# typer takes a list of choices only as an Enum (a list of Literal is refused)
SeriesName = Enum("SeriesName", {name: name for name in SERIES}, type=str)  # type: ignore[misc]


@app.command()
def plot(
    runs: list[Path] = typer.Argument(
        ..., metavar="RUN", help="Run directories (the --out of `mtkit train`), overlaid.", show_default=False
    ),
    x: XAxis = typer.Option(  # type: ignore[valid-type]
        "minutes", "--x", help="x axis: minutes of training wall-clock, updates, or tokens trained on."
    ),
    y: Optional[list[SeriesName]] = typer.Option(
        None,
        "--y",
        show_default=" ".join(DEFAULT_SERIES),
        help="A series to plot, one panel each (repeatable: --y bleu --y loss); "
        "training and validation values of it are told apart.",
    ),
    output: Path = typer.Option(
        ..., "--output", "-o", help="The image to write: .png, .pdf or .svg.", show_default=False
    ),
) -> None:
    """Plot learning curves from RUN/metrics.jsonl, several runs overlaid.

    Needs the `plot` extra: pip install 'mtkit\\[plot]'.

    Example: mtkit plot runs/small runs/base --y bleu --y loss -o curves.png
    """
    import logging

    from mtkit.plot import plot as draw_plot

    setup_logging(logging.WARNING)  # a line cut short by a kill, skipped: said
    written = draw_plot(runs, output, axis=x, series=[s.value for s in y] if y else None)
    err.print(f"mtkit: wrote {escape(str(written))}")
