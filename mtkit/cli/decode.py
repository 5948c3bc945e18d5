"""`mtkit average` and `mtkit translate`: from checkpoints to a model file, and from a model to text."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from mtkit.cli.app import app, err, setup_logging
from mtkit.errors import MtkitError


@app.command()
def average(
    paths: list[str] = typer.Argument(..., help="A run directory, or the checkpoint files to average.",
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

    paths = [Path(p) for p in paths]
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
def translate(
    model: str = typer.Option(..., "--model", "-m", help="An mtkit model or checkpoint file (e.g. averaged.pt).",
                               show_default=False),
    input: Optional[str] = typer.Option(None, "--input", "-i", show_default="stdin",
                                         help="Raw text to translate, one sentence a line."),
    output: Optional[str] = typer.Option(None, "--output", "-o", show_default="stdout",
                                          help="Where the translations go, one line for each input line."),
    beam: int = typer.Option(4, help="Beam size; 1 is greedy search."),
    alpha: float = typer.Option(0.6, help="Length penalty exponent (0 ranks by plain log-probability)."),
    lenpen: str = typer.Option("gnmt", help="Length penalty: gnmt ((5+|Y|)/6)^alpha, fairseq |Y|^alpha, or none."),
    max_len_a: float = typer.Option(1.0, help="Longest output = a x source tokens + b."),
    max_len_b: int = typer.Option(50, help="Longest output = a x source tokens + b."),
    batch_tokens: int = typer.Option(4096, help="Source tokens per batch, padding included."),
    nbest: int = typer.Option(1, help="Write the K best as LINE<TAB>TRANSLATION<TAB>SCORE, K lines per input."),
    scores: bool = typer.Option(False, "--scores", help="Append <TAB>SCORE (log-probability / length penalty)."),
    device: str = typer.Option("auto", help="cpu, cuda, cuda:N, or auto (CUDA when available)."),
    precision: str = typer.Option("fp32", help="fp32, bf16, or fp16 (fp16 on CUDA only)."),
    threads: int = typer.Option(0, help="CPU threads for PyTorch; 0 keeps PyTorch's default."),
) -> None:
    """Translate raw text, one sentence a line, with beam search.

    Example: mtkit translate -m runs/small/averaged.pt < test.en > test.hyp.de
    """
    import contextlib
    import logging

    import torch
    from tqdm import tqdm

    from mtkit.config import DecodeConfig
    from mtkit.decode.textio import open_output, read_lines
    from mtkit.decode.translator import Translator

    setup_logging(logging.WARNING)
    config = DecodeConfig(beam=beam, alpha=alpha, lenpen=lenpen, max_len_a=max_len_a, max_len_b=max_len_b,
                          nbest=nbest)
    if batch_tokens < 1 or threads < 0:
        raise MtkitError("--batch-tokens must be positive and --threads 0 or positive.")
    if threads:
        torch.set_num_threads(threads)
    if input is not None and not Path(input).is_file():
        raise MtkitError(f"input file {input} does not exist.")
    translator = Translator.load(model, device=device, precision=precision)
    with contextlib.ExitStack() as stack:
        source = stack.enter_context(open(input, "rb")) if input is not None else sys.stdin.buffer
        interactive = source.isatty()  # translate each line as it is typed
        lines = read_lines(source, name=str(input or "input"))
        stream = translator.translate_stream(lines, config, batch_tokens, chunk_lines=1 if interactive else 1000)
        out = stack.enter_context(open_output(output))
        for tr in tqdm(stream, unit=" lines", disable=not sys.stderr.isatty() or interactive, file=sys.stderr):
            if nbest > 1:
                text = "".join(f"{tr.line}\t{t}\t{s:.4f}\n" for t, s in tr.hypotheses)
            else:
                text = f"{tr.text}\t{tr.score:.4f}\n" if scores else f"{tr.text}\n"
            out.write(text.encode("utf-8"))
            out.flush()
