"""The `mtkit` command line: thin typer commands that turn options into configs and call the library.

Heavy imports (torch, sentencepiece, sacrebleu) happen inside the commands so that
`mtkit --help` answers at once. Errors of type MtkitError become one red line on stderr
and exit code 1; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
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


def _setup_logging(level: int) -> None:
    """One log format for every command, on stderr; under torchrun, ranks other than 0 only warn."""
    import logging
    import os

    rank = int(os.environ.get("RANK", "0"))
    logging.basicConfig(level=level if rank == 0 else max(level, logging.WARNING), stream=sys.stderr,
                        format=f"%(asctime)s{f' [rank {rank}]' if rank else ''} | %(levelname)s | %(message)s",
                        datefmt="%H:%M:%S")


def _log(message: str) -> None:
    err.print(f"[dim]{escape(message)}[/]")


def _list_corpora() -> None:
    from rich.table import Table

    from mtkit.data.corpora import default_registry

    table = Table(title="mtkit prepare NAME: named corpora (all splits of both directions come from the same files)",
                  title_justify="left")
    for column in ("name", "train", "valid", "test", "pairs", "download", "vocab"):
        table.add_column(column, overflow="fold", no_wrap=column in ("name", "pairs", "vocab"))
    for corpus in default_registry():
        table.add_row(corpus.name, corpus.contents("train"), corpus.contents("valid"), corpus.contents("test"),
                      corpus.pairs, corpus.download_size(), str(corpus.vocab_size))
    table.add_row("custom", "--train-src/--train-tgt", "--valid-src/--valid-tgt", "[--test-src/--test-tgt]",
                  "yours", "-", "by size")
    console = Console(highlight=False)
    if not console.is_terminal:
        console.width = max(console.width, 140)
    console.print(table)


@app.command()
def prepare(
    name: Optional[str] = typer.Argument(None, help="A corpus of `--list` (e.g. wmt14-en-de, multi30k-en-de), or 'custom'."),
    out: Optional[Path] = typer.Option(None, "--out", help="Output directory. \\[default: data/NAME]"),
    mirror: Optional[Path] = typer.Option(None, "--mirror", help="A directory holding the archives, put there by hand "
                                          "(no network is used); a missing one is named with its URL."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Download cache. \\[default: $MTKIT_CACHE, else the user's "
                                         "cache dir, e.g. ~/.cache/mtkit]"),
    list_: bool = typer.Option(False, "--list", help="Show the named corpora, their sizes and contents, and exit."),
    dedup: bool = typer.Option(False, "--dedup", help="Also drop repeated training pairs (after normalisation)."),
    max_words: Optional[int] = typer.Option(None, "--max-words", min=0, help="Drop training pairs with a side longer "
                                            "than this many words; 0: no limit. \\[default: 250; Multi30k: 0]"),
    max_ratio: Optional[float] = typer.Option(None, "--max-ratio", min=0, help="Drop training pairs whose word counts "
                                              "differ by more than this factor; 0: no limit. \\[default: 1.5; Multi30k: 0]"),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, help="Processes for cleaning. \\[default: all cores]"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Fetch every file from BASE_URL/<file name> "
                                           "instead of its origin (a private HTTP mirror)."),
    retries: int = typer.Option(5, "--retries", min=0, help="Retries of a dropped download, each resuming where it stopped."),
    force: bool = typer.Option(False, "--force", help="Redo the work even if DIR/prepare.json says it is done."),
    src_lang: Optional[str] = typer.Option(None, "--src-lang", help="custom: source language code \\[default: from the file suffix]"),
    tgt_lang: Optional[str] = typer.Option(None, "--tgt-lang", help="custom: target language code \\[default: from the file suffix]"),
    train_src: Optional[Path] = typer.Option(None, "--train-src", help="custom: training source text (.gz is fine)."),
    train_tgt: Optional[Path] = typer.Option(None, "--train-tgt", help="custom: training target text."),
    valid_src: Optional[Path] = typer.Option(None, "--valid-src", help="custom: validation source text."),
    valid_tgt: Optional[Path] = typer.Option(None, "--valid-tgt", help="custom: validation target text."),
    test_src: Optional[Path] = typer.Option(None, "--test-src", help="custom: test source text."),
    test_tgt: Optional[Path] = typer.Option(None, "--test-tgt", help="custom: test target text."),
) -> None:
    """Fetch, extract and clean a named corpus into DIR/raw.

    Example: mtkit prepare multi30k-en-de --mirror ../shared/data/multi30k-en-de
    """
    if list_:
        _list_corpora()
        return
    if not name:
        raise MtkitError("name a corpus (`mtkit prepare --list` shows them), e.g. `mtkit prepare wmt14-en-de`.")
    from mtkit.data.prepare import PrepareOptions
    from mtkit.data.prepare import prepare as run_prepare

    pairs = {"train": (train_src, train_tgt), "valid": (valid_src, valid_tgt), "test": (test_src, test_tgt)}
    given = {split: p for split, p in pairs.items() if p != (None, None)}
    custom_files = None
    langs = None
    if name == "custom":
        for split, (a, b) in given.items():
            if a is None or b is None:
                raise MtkitError(f"give both --{split}-src and --{split}-tgt.")
        custom_files = {split: (str(a), str(b)) for split, (a, b) in given.items()}
        if (src_lang is None) != (tgt_lang is None):
            raise MtkitError("give both --src-lang and --tgt-lang, or neither.")
        langs = (src_lang, tgt_lang) if src_lang and tgt_lang else None
    elif given or src_lang or tgt_lang:
        raise MtkitError("--train-src/--valid-src/--test-src and --src-lang/--tgt-lang are for `mtkit prepare custom`.")

    options = PrepareOptions(out=out, cache=cache, mirror=mirror, base_url=base_url, retries=retries, workers=workers,
                             dedup=dedup, max_words=max_words, max_ratio=max_ratio, progress=sys.stderr.isatty(),
                             force=force)
    record = run_prepare(name, options, custom_files=custom_files, langs=langs, log=_log)
    out_dir = out or Path("data") / record["corpus"]
    splits = record["splits"]
    summary = []
    for split, info in splits.items():
        if split == "train":
            dropped = ", ".join(f"{rule} {n}" for rule, n in info["dropped"].items() if n) or "none"
            summary.append(f"train {info['kept']} pairs (of {info['pairs_in']}; dropped: {dropped})")
        else:
            summary.append(f"{split} {info['lines']}")
    err.print(f"[green]prepared[/] {escape(str(out_dir))}/raw ({record['src_lang']}->{record['tgt_lang']}): {escape('; '.join(summary))}")
    err.print(f"next: mtkit bpe {escape(str(out_dir))}")


@app.command()
def bpe(
    data_dir: Path = typer.Argument(..., help="A directory written by `mtkit prepare` (holding raw/)."),
    vocab_size: Optional[int] = typer.Option(None, "--vocab-size", min=16, help="Pieces in the joint vocabulary. "
                                             "\\[default: 37000 wmt14-en-de, 32000 wmt14-en-fr, 8000 multi30k; "
                                             "custom: 8000 / 16000 / 32000 under 100k / 1M / above training pairs]"),
    sample: int = typer.Option(2_000_000, "--sample", min=2, help="At most this many training sentences (both "
                               "languages together) are drawn, seeded, to learn from."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="Threads for encoding; the result does "
                                          "not depend on it. \\[default: all cores]"),
    seed: int = typer.Option(1, "--seed", help="Seed of the sentence sample."),
    force: bool = typer.Option(False, "--force", help="Relearn and re-encode even if bpe.json says it is up to date."),
) -> None:
    """Learn a joint SentencePiece BPE vocabulary and binarize every split.

    Example: mtkit bpe data/multi30k-en-de --vocab-size 8000
    """
    from mtkit.data.bpe import BpeOptions, build

    record = build(data_dir, BpeOptions(vocab_size=vocab_size, sample=sample, threads=threads, seed=seed, force=force,
                                        progress=sys.stderr.isatty()), log=_log)
    parts = []
    for split, info in record["splits"].items():
        tokens = ", ".join(f"{lang} {n}" for lang, n in info["tokens"].items())
        parts.append(f"{split} {info['sentences']} sentences ({tokens} tokens)")
    how = "reused" if record["reused_model"] else "learned"
    err.print(f"[green]{how}[/] {escape(str(data_dir))}/spm.model ({record['model']['pieces']} pieces); "
              f"{escape('; '.join(parts))}")


PRESET_DEFAULT = "from the preset"


@app.command()
def train(
    data: Path = typer.Argument(..., help="Data directory prepared by `mtkit bpe` (bpe.json, spm.model, bin/)."),
    out: Path = typer.Option(..., "--out", "-o", help="Run directory; rerunning on an existing one resumes it."),
    preset: str = typer.Option("base", help="Architecture and training defaults: tiny, small, base or big."),
    max_tokens: Optional[int] = typer.Option(None, help="Tokens per batch and side, padding included.",
                                             show_default=PRESET_DEFAULT),
    update_freq: Optional[int] = typer.Option(None, help="Batches accumulated per update on each process.",
                                              show_default="auto: base/big reach ~25k tokens per update"),
    lr_scale: Optional[float] = typer.Option(None, help="Factor on the paper's learning-rate schedule.",
                                             show_default=PRESET_DEFAULT),
    warmup: Optional[int] = typer.Option(None, help="Warmup updates of the schedule.", show_default=PRESET_DEFAULT),
    dropout: Optional[float] = typer.Option(None, help="P_drop of the model.", show_default=PRESET_DEFAULT),
    label_smoothing: Optional[float] = typer.Option(None, help="Label smoothing epsilon.",
                                                    show_default=PRESET_DEFAULT),
    max_steps: Optional[int] = typer.Option(None, help="Stop after this many updates.", show_default=PRESET_DEFAULT),
    max_minutes: Optional[float] = typer.Option(
        None, help="Stop after this many minutes of training wall-clock (validation and saving included; "
        "a resumed run continues its budget; 0: no budget).", show_default=PRESET_DEFAULT),
    max_epochs: Optional[int] = typer.Option(None, help="Stop after this many epochs (0: no limit).",
                                             show_default=PRESET_DEFAULT),
    clip_norm: Optional[float] = typer.Option(None, help="Clip the gradient norm to this (0: off, as in the paper).",
                                              show_default=PRESET_DEFAULT),
    precision: Optional[str] = typer.Option(None, help="fp32, bf16 (autocast) or fp16 (with a loss scaler).",
                                            show_default=PRESET_DEFAULT),
    seed: Optional[int] = typer.Option(None, help="Seed for weights, dropout and batch order.",
                                       show_default=PRESET_DEFAULT),
    valid_every: Optional[int] = typer.Option(None, help="Updates between validations.",
                                              show_default=PRESET_DEFAULT),
    valid_bleu: Optional[int] = typer.Option(
        None, help="Also translate the first N dev sentences greedily at each validation and pick "
        "checkpoint_best.pt by their sacreBLEU (0: off; best by validation loss).", show_default=PRESET_DEFAULT),
    patience: Optional[int] = typer.Option(None, help="Stop after this many validations without a new best (0: never).",
                                           show_default=PRESET_DEFAULT),
    save_every_steps: Optional[int] = typer.Option(None, help="Save a checkpoint every this many updates (0: off).",
                                                   show_default=PRESET_DEFAULT),
    save_every_minutes: Optional[float] = typer.Option(None, help="Save a checkpoint every this many minutes (0: off).",
                                                       show_default=PRESET_DEFAULT),
    keep_last: Optional[int] = typer.Option(None, help="Keep the newest N numbered checkpoints.",
                                            show_default=PRESET_DEFAULT),
    log_every: Optional[int] = typer.Option(None, help="Updates between log lines.", show_default=PRESET_DEFAULT),
    set_: Optional[list[str]] = typer.Option(None, "--set", help="Override a model field, e.g. --set encoder_layers=4 "
                                   "--set pre_norm=true (repeatable).", show_default="none"),
    device: str = typer.Option("auto", help="auto (CUDA if present), cpu, cuda or cuda:N; torchrun: one GPU a rank."),
    threads: int = typer.Option(0, help="CPU threads for torch (0: torch's default)."),
) -> None:
    """Train a Transformer on binarized data, the way section 5 of the paper does.

    Several GPUs: torchrun --nproc_per_node 8 -m mtkit train DATA --preset big --out RUN.

    Example: mtkit train data/multi30k-en-de --preset small --out runs/small
    """
    import dataclasses
    import logging
    import os

    from mtkit.config import ModelConfig, get_preset, model_config, parse_overrides
    from mtkit.data.dataset import open_data

    rank = int(os.environ.get("RANK", "0"))
    _setup_logging(logging.INFO)
    chosen = get_preset(preset)
    data_dir = open_data(data)
    overrides = parse_overrides(set_ or [], ModelConfig)
    if dropout is not None:
        overrides["dropout"] = dropout
    model_cfg = model_config(preset, data_dir.vocab_size, **overrides)
    given = {k: v for k, v in dict(
        max_tokens=max_tokens, update_freq=update_freq, lr_scale=lr_scale, warmup=warmup,
        label_smoothing=label_smoothing, max_steps=max_steps, max_minutes=max_minutes, max_epochs=max_epochs,
        clip_norm=clip_norm,
        precision=precision, seed=seed, valid_every=valid_every, valid_bleu=valid_bleu, patience=patience, save_every_steps=save_every_steps,
        save_every_minutes=save_every_minutes, keep_last=keep_last, log_every=log_every).items() if v is not None}
    if update_freq is not None:
        given["update_tokens"] = 0  # an explicit --update-freq wins over the preset's token target
    train_cfg = dataclasses.replace(chosen.train, **given)

    from mtkit.train.trainer import train as run_training

    result = run_training(data, out, model_cfg, train_cfg, device=device, threads=threads)
    if rank == 0:
        best = f"best dev BLEU {-result.best:.2f}" if train_cfg.valid_bleu else f"best valid NLL {result.best:.3f}"
        err.print(f"trained to step {result.step} ({result.stopped}); {best}; "
                  f"checkpoints in {out}")


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

    _setup_logging(logging.WARNING)
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
