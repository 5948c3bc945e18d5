"""`mtkit average` and `mtkit translate`: from checkpoints to a model file, and from a model to text."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal, Optional

import typer
from rich.markup import escape

from mtkit.cli.app import app, err, setup_logging
from mtkit.cli.options import build, config_options, device_option
from mtkit.config import DECODE_PRECISION_CHOICES, DEFAULT_BATCH_TOKENS, DEFAULT_CHUNK_LINES, DecodeConfig
from mtkit.errors import MtkitError


@app.command()
def average(
    paths: list[Path] = typer.Argument(..., help="A run directory, or the checkpoint files to average.",
                                       show_default=False),
    last: Optional[int] = typer.Option(None, "--last", "-n", show_default="5",
                                       help="With a run directory: average its newest N checkpoint_<step>.pt "
                                            "(the paper: 5 for base, 20 for big)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", show_default="RUN/averaged.pt",
                                          help="The model file to write; required when averaging named files."),
) -> None:
    """Average the parameters of the last N checkpoints of a run into one model file.

    Example: mtkit average runs/small --last 5
    """

    from mtkit import checkpoint

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise MtkitError(f"{', '.join(missing)} does not exist (give a run directory or checkpoint files).")
    if len(paths) == 1 and paths[0].is_dir():
        run = paths[0]
        want = 5 if last is None else last
        files = checkpoint.run_checkpoints(run, want)
        if len(files) < want:
            err.print(f"mtkit: {escape(str(run))} has only {len(files)} numbered checkpoint(s); averaging all of them.")
        output = output or str(run / "averaged.pt")
    else:
        if any(p.is_dir() for p in paths):
            raise MtkitError("give either one run directory or checkpoint files, not a mix.")
        if last is not None:
            raise MtkitError("--last picks checkpoints from a run directory; with files, list the ones to average.")
        if output is None:
            raise MtkitError("averaging named files needs --output FILE.")
        files = paths
    err.print(f"mtkit: averaging {len(files)} checkpoint(s): {escape(', '.join(str(f) for f in files))}")
    averaged = checkpoint.average(files)
    checkpoint.atomic_save(averaged, output)
    err.print(f"mtkit: wrote {escape(str(output))} (model only, step {averaged['step']}).")


@app.command()
@config_options(DecodeConfig)
def translate(
    model: str = typer.Option(..., "--model", "-m", help="An mtkit model or checkpoint file (e.g. averaged.pt).",
                               show_default=False),
    input: Optional[str] = typer.Option(None, "--input", "-i", show_default="stdin",
                                         help="Raw text to translate, one sentence a line (a file, a pipe, or -)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", show_default="stdout",
                                          help="Where the translations go, one line for each input line."),
    batch_tokens: int = typer.Option(DEFAULT_BATCH_TOKENS, "--batch-tokens", "--max-tokens", min=1,
                                     help="Source tokens per batch, padding included (--max-tokens: the same)."),
    buffer_size: Optional[int] = typer.Option(None, "--buffer-size", min=1, show_default=f"{DEFAULT_CHUNK_LINES}; "
                                              "1 on a terminal", help="Lines read before translating them; "
                                              "1 answers each line at once (for a co-process)."),
    scores: bool = typer.Option(False, "--scores", help="Append <TAB>SCORE (log-probability / length penalty)."),
    device: str = device_option("cpu, cuda, cuda:N, mps, or auto (CUDA when available)."),
    precision: Literal[DECODE_PRECISION_CHOICES] = typer.Option(  # type: ignore[valid-type]
        "fp32", help="fp32, bf16, fp16 (CUDA only), or int8 (CPU only: dynamic int8 Linear layers; "
                     "faster, BLEU within a few tenths)."),
    threads: int = typer.Option(0, min=0, help="CPU threads for PyTorch; 0 keeps PyTorch's default."),
    *,
    given: dict[str, Any],
) -> None:
    """Translate raw text, one sentence a line, with beam search.

    Example: mtkit translate -m runs/small/averaged.pt < test.en > test.hyp.de
    """
    import contextlib
    import logging

    import torch
    from tqdm import tqdm

    from mtkit.decode.translator import Translator
    from mtkit.textio import one_line, open_input, open_output, read_lines_lenient

    setup_logging(logging.WARNING)
    config = build(DecodeConfig(), given)
    if threads:
        torch.set_num_threads(threads)
    with contextlib.ExitStack() as stack:
        source = stack.enter_context(open_input(input))
        out = stack.enter_context(open_output(output))  # before the model: a bad path is said at once
        translator = Translator.load(model, device=device, precision=precision)
        interactive = source.isatty()  # translate each line as it is typed
        chunk_lines = buffer_size or (1 if interactive else DEFAULT_CHUNK_LINES)
        lines = read_lines_lenient(source, name=str(input or "input"))
        stream = translator.translate_stream(lines, config, batch_tokens, chunk_lines=chunk_lines)
        for tr in tqdm(stream, unit=" lines", disable=not sys.stderr.isatty() or interactive, file=sys.stderr):
            if config.nbest > 1:
                text = "".join(f"{tr.line}\t{one_line(t)}\t{s:.4f}\n" for t, s in tr.hypotheses)
            else:
                text = f"{one_line(tr.text)}\t{tr.score:.4f}\n" if scores else f"{one_line(tr.text)}\n"
            out.write(text.encode("utf-8"))
            out.flush()
