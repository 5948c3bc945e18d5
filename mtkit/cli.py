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
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING, stream=sys.stderr,
                        format=f"%(asctime)s{' [rank %d]' % rank if rank else ''} %(message)s", datefmt="%H:%M:%S")
    chosen = get_preset(preset)
    data_dir = open_data(data)
    overrides = parse_overrides(set_ or [], ModelConfig)
    vocab_size = overrides.pop("vocab_size", data_dir.vocab_size)
    if dropout is not None:
        overrides["dropout"] = dropout
    model_cfg = model_config(preset, vocab_size, **overrides)
    given = {k: v for k, v in dict(
        max_tokens=max_tokens, update_freq=update_freq, lr_scale=lr_scale, warmup=warmup,
        label_smoothing=label_smoothing, max_steps=max_steps, max_epochs=max_epochs, clip_norm=clip_norm,
        precision=precision, seed=seed, valid_every=valid_every, patience=patience, save_every_steps=save_every_steps,
        save_every_minutes=save_every_minutes, keep_last=keep_last, log_every=log_every).items() if v is not None}
    if update_freq is not None:
        given["update_tokens"] = 0  # an explicit --update-freq wins over the preset's token target
    train_cfg = dataclasses.replace(chosen.train, **given)

    from mtkit.train.trainer import train as run_training

    result = run_training(data, out, model_cfg, train_cfg, device=device, threads=threads)
    if rank == 0:
        err.print(f"trained to step {result.step} ({result.stopped}); best valid NLL {result.best:.3f}; "
                  f"checkpoints in {out}")


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
