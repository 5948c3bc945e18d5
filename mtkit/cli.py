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
    from pathlib import Path

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
    from pathlib import Path

    import torch
    from tqdm import tqdm

    from mtkit.config import DecodeConfig
    from mtkit.decode.textio import open_output, read_lines
    from mtkit.decode.translator import Translator

    logging.basicConfig(level=logging.WARNING, format="mtkit: %(levelname)s: %(message)s", stream=sys.stderr)
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


@app.command()
def score(
    hyp: str = typer.Argument(..., help="Detokenized translations, one a line (.gz is fine).", show_default=False),
    ref: list[str] = typer.Option([], "--ref", "-r", show_default="none",
                                   help="Reference translations; repeat for several references."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
    paper_bleu: bool = typer.Option(False, "--paper-bleu",
                                    help="Also the paper's tokenized BLEU: Moses tokens, a-b split as "
                                         "a ##AT##-##AT## b (as held against 27.3 / 28.4)."),
    lang: Optional[str] = typer.Option(None, "--lang", show_default="the target of --langpair, else de",
                                       help="Language of the Moses tokenizer for --paper-bleu."),
    compare: Optional[str] = typer.Option(None, "--compare", show_default="none",
                                           help="A second system's translations: paired bootstrap resampling "
                                                "(1000 samples) of it against HYP."),
    test_set: Optional[str] = typer.Option(None, "--test-set", "-t", show_default="none",
                                           help="A sacrebleu test set (e.g. wmt14) whose references to use."),
    langpair: Optional[str] = typer.Option(None, "--langpair", "-l", show_default="none",
                                           help="Language pair of --test-set, e.g. en-de."),
) -> None:
    """Score translations against references: sacreBLEU, chrF, TER, tokenized BLEU.

    Example: mtkit score test.hyp.de --ref test.de --paper-bleu
    """
    import dataclasses
    import json

    from mtkit import score as scoring

    if test_set is not None and ref:
        raise MtkitError("give references either with --ref or with --test-set, not both.")
    if test_set is not None:
        if langpair is None:
            raise MtkitError("--test-set needs --langpair, e.g. --langpair en-de.")
        refs = scoring.sacrebleu_references(test_set, langpair)
        ref_names = [f"{test_set} {langpair} reference {i + 1}" for i in range(len(refs))]
    elif ref:
        refs = [scoring.read_lines(r) for r in ref]
        ref_names = [str(r) for r in ref]
    else:
        raise MtkitError("no references: give --ref FILE, or --test-set NAME --langpair SRC-TGT.")
    hyps = scoring.read_lines(hyp)
    scoring.check_lengths(hyps, refs, str(hyp), ref_names)
    results = scoring.corpus_scores(hyps, refs)
    if paper_bleu:
        tok_lang = lang or (langpair.split("-")[-1] if langpair else "de")
        results.append(scoring.paper_bleu(hyps, refs, tok_lang))
    comparisons = []
    if compare is not None:
        hyps2 = scoring.read_lines(compare)
        scoring.check_lengths(hyps2, refs, str(compare), ref_names)
        comparisons = scoring.paired_bootstrap(hyps, hyps2, refs)
    if json_out:
        report: dict = {"hyp": str(hyp), "lines": len(hyps), "scores": [dataclasses.asdict(r) for r in results]}
        if compare is not None:
            report["compare"] = {"hyp2": str(compare), "samples": 1000,
                                 "metrics": [dataclasses.asdict(c) for c in comparisons]}
        typer.echo(json.dumps(report, ensure_ascii=False, indent=1))
        return
    for r in results:
        typer.echo(f"{r.text}\n    {r.signature}")
    if comparisons:
        typer.echo(f"paired bootstrap resampling, 1000 samples: {compare} (system) against {hyp} (baseline)")
        for c in comparisons:
            typer.echo(f"    {c.name:<6} baseline {c.baseline:6.2f} (mean {c.baseline_mean:.2f} +- {c.baseline_ci:.2f})"
                       f"  system {c.system:6.2f} (mean {c.system_mean:.2f} +- {c.system_ci:.2f})"
                       f"  p = {c.p_value:.4f}")


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
