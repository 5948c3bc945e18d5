"""When training stops: the one stop rule, the clock, and the records the loop decides with."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from mtkit.config import TrainConfig
from mtkit.errors import MtkitError
from mtkit.train.metrics import Window
from mtkit.train.progress import Progress


@dataclass(frozen=True)
class TrainResult:
    model: torch.nn.Module
    step: int
    epoch: int
    best: float
    stopped: str  # max_steps, max_epochs, max_minutes, patience, or the signal: SIGTERM, SIGINT


@dataclass(frozen=True)
class UpdateResult:
    """One update as every rank sees it after the update's all-reduce."""

    applied: bool  # the optimizer stepped (not: a non-finite loss or gradient, or an fp16 overflow)
    loss: float  # summed over the update's batches on every rank
    nll: float
    grad_norm: float  # L2 norm of the whole gradient before clipping
    save_asked: bool  # rank 0's clock asks for a checkpoint (--save-every-minutes)
    time_up: bool  # rank 0's clock says --max-minutes is spent
    stop_signal: str  # "SIGTERM" or "SIGINT" when any rank received one, else ""


@dataclass
class LoopState:
    """The loop's bookkeeping between updates (not saved: a resumed run starts it afresh)."""

    last_save: float  # time.monotonic() of the last regular checkpoint
    saved_step: int  # the step that checkpoint holds
    last_valid: int = -1  # the step of the last validation
    window: Window = dataclasses.field(default_factory=Window)


def out_of_time(p: Progress, cfg: TrainConfig) -> bool:
    return bool(cfg.max_minutes and p.elapsed >= 60 * cfg.max_minutes)


def stop_reason(p: Progress, cfg: TrainConfig, time_up: bool, stop_signal: str = "") -> str:
    """Why training stops now, or "" to go on: the one stop rule, at start and after every update."""
    if stop_signal:
        return stop_signal
    if p.step >= cfg.max_steps:
        return "max_steps"
    if time_up:
        return "max_minutes"
    if cfg.max_epochs and p.epoch >= cfg.max_epochs:
        return "max_epochs"
    if cfg.patience and p.bad_valids >= cfg.patience:
        return "patience"
    return ""


def check_nonfinite(p: Progress, cfg: TrainConfig) -> None:
    """Refuse to go on after --max-nonfinite skipped updates in a row: the run diverged, and one sentence says
    what to change."""
    if p.nonfinite >= cfg.max_nonfinite:
        raise MtkitError(
            f"the loss or gradient norm was NaN or infinite for {p.nonfinite} updates in a row at "
            f"step {p.step}; lower --lr-scale (now {cfg.lr_scale}), set --clip-norm (e.g. 1.0), "
            "raise --warmup, or use --precision fp32; the run resumes from checkpoint_last.pt."
        )
