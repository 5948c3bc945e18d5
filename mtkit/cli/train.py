"""`mtkit train`: options in, a TrainConfig and ModelConfig out, the trainer called."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from mtkit.cli.app import app, err, setup_logging


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
    setup_logging(logging.INFO)
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
