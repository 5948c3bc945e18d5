"""`mtkit calibrate`: a model's confidence calibrator, fitted on a data directory's dev set
(mtkit/decode/confidence_fit.py); and what `mtkit translate --confidence` cannot go with."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from mtkit.cli.app import app, err, setup_logging
from mtkit.cli.options import build, config_options, device_option, revision_option
from mtkit.config import DEFAULT_BATCH_TOKENS, DecodeConfig, EngineConfig
from mtkit.errors import MtkitError


@app.command()
@config_options(DecodeConfig, EngineConfig)
def calibrate(
    data: Path = typer.Argument(
        ..., show_default=False, help="A data directory (`mtkit prepare`): its dev set (raw/valid) and references."
    ),
    model: list[str] = typer.Option(
        ...,
        "--model",
        "-m",
        show_default=False,
        help="The model whose translations get a confidence (as `mtkit translate -m`; repeat for an ensemble).",
    ),
    reverse_model: Optional[str] = typer.Option(
        None,
        "--reverse-model",
        show_default="none",
        help="A model of the other direction: its score of each source given the translation is a feature too "
        "(`mtkit translate --confidence --reverse-model` then uses it).",
    ),
    threshold: float = typer.Option(
        40.0,
        "--threshold",
        min=0.0,
        max=100.0,
        help="Acceptable = a sentence chrF of at least this against the reference (chosen on Multi30k's dev set).",
    ),
    output: Optional[Path] = typer.Option(
        None,
        "--output",
        "-o",
        show_default="MODEL.confidence.json beside the model, DIR/confidence.json in a model directory",
        help="The calibrator file to write; `translate --confidence` finds it there by default.",
    ),
    data_split: str = typer.Option("valid", "--data-split", help="The split of DATA to fit on (never the test set)."),
    batch_tokens: int = typer.Option(
        DEFAULT_BATCH_TOKENS, "--batch-tokens", min=1, help="Source tokens per batch, padding included."
    ),
    device: str = device_option("cpu, cuda, cuda:N, mps, or auto (CUDA when available)."),
    threads: int = typer.Option(0, min=0, help="CPU threads; 0 keeps PyTorch's default."),
    revision: Optional[str] = revision_option(),
    *,
    given: dict[str, Any],
) -> None:
    """Fit the calibrator that turns a model's scores into a confidence: the probability a translation is acceptable.

    Example: mtkit calibrate data/multi30k-en-de -m runs/small/averaged.pt --reverse-model runs/de-en/averaged.pt

    Translates DATA's dev set with the decoding settings given (use the ones you will translate with), rates each
    translation by its sentence chrF against the reference, and fits a logistic regression of "chrF >= threshold"
    on each translation's features. `mtkit translate --confidence` then prints that probability after each line.
    """
    import logging

    from mtkit.decode import loading
    from mtkit.decode.confidence import sidecar
    from mtkit.decode.confidence_fit import fit

    setup_logging(logging.WARNING)
    precision = build(EngineConfig(), given).precision
    given = {k: v for k, v in given.items() if k != "precision"}
    build(DecodeConfig(), given)  # a bad value said under its flag
    # found and checked before anything is read; it decodes by its own defaults under the flags given
    found = loading.plan(model, revision, device=device, precision=precision, threads=threads, **given)
    if len(found.model.sources) > 1 and output is None:
        raise MtkitError(
            "an ensemble's calibrator is its own, not its first model's: name it with --output (and give it to "
            "`mtkit translate --confidence` with --calibrator)."
        )
    target = output or sidecar(found.model.sources[0].path)
    translator = found.open()
    config = translator.defaults
    reverse = None if reverse_model is None else loading.prepare(reverse_model, device, precision, threads=threads)
    calibrator = fit(translator, data, config, reverse, threshold, data_split, batch_tokens)
    calibrator.save(target)
    dev = calibrator.fitted_on["dev"]
    heads = ", ".join(f"{name} {dev[f'spearman_{name}']:.3f}" for name in calibrator.heads)
    head = list(calibrator.heads)[-1]  # the one with the most features
    sweep = dev[f"spearman_{head}_by_threshold"]
    best = max(sweep, key=sweep.get) if sweep else f"{threshold:g}"
    if (
        not sweep or sweep[best] < dev[f"spearman_{head}"] + 0.01
    ):  # a smaller gain is within what another dev set would change
        best = f"{threshold:g}"
    err.print(
        f"mtkit: wrote {escape(str(target))}: fitted on {dev['sentences']} {escape(data_split)} sentences, "
        f"{dev['acceptable']:.0%} of them acceptable (chrF >= {threshold:g}); Spearman with chrF "
        f"(5-fold): {heads}; the raw score's {dev['spearman_score']:.3f}."
        + ("" if best == f"{threshold:g}" else f" On this dev set --threshold {best} ranks best ({sweep[best]:.3f}).")
    )


def check_confidence(
    confidence: bool,
    reverse_model: Optional[str],
    calibrator: Optional[str],
    sampling: bool,
    score_only: bool,
    format: str,
    nbest: int,
) -> None:
    """`mtkit translate`: one sentence for --confidence with what it cannot go with, or its options without it."""
    if not confidence:
        given = ["--reverse-model"] * (reverse_model is not None) + ["--calibrator"] * (calibrator is not None)
        if given:
            raise MtkitError(f"{given[0]} applies only with --confidence.")
        return
    clash = {
        "--sampling": sampling,
        "--score-only": score_only,
        f"--format {format}": format == "html-lines",  # a document: its segments rated, the file left alone
        "--nbest": nbest > 1,
    }
    for flag, on in clash.items():
        if on:
            raise MtkitError(f"--confidence rates the one best translation of each line of text; drop {flag}.")
