"""The trainer's records: the start of a run, a train line every --log-every updates, and its end.

Every record goes to metrics.jsonl and (as one line) to the log through `MetricsLog`.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

import torch

from mtkit.data.batching import padding_efficiency
from mtkit.train.metrics import Window
from mtkit.train.signals import SIGNAL_STOPS

if TYPE_CHECKING:
    from mtkit.train.trainer import Trainer


def start(t: Trainer) -> None:
    """The run's first records: model, device and batch size; the data plan; where a resumed run continues."""
    cfg, world, p = t.cfg, t.world, t.progress
    params = sum(q.numel() for q in t.model.parameters())
    per_update = cfg.update_freq * world.size
    real = (t.plan.src_tokens.mean() + t.plan.tgt_tokens.mean()) / 2 * per_update
    src_eff, tgt_eff, both = padding_efficiency(t.plan)
    t.log.event(
        "start",
        params=params,
        device=str(world.device),
        precision=t.precision.name,
        precision_why=t.precision.reason,
        fp32_matmul=t.precision.matmul,
        fp32_matmul_why=t.precision.matmul_reason,
        cpu_heap=t.heap[0],
        cpu_heap_why=t.heap[1],
        world_size=world.size,
        effective_batch=f"{cfg.update_freq} x {cfg.max_tokens:,} tokens x {world.size} rank(s) "
        f"= up to {cfg.max_tokens * per_update:,} tokens per side, "
        f"about {real:,.0f} real",
        update_freq=cfg.update_freq,
        max_tokens=cfg.max_tokens,
        torch_threads=torch.get_num_threads(),
        **t.compile_fields,  # compile, why, batch shapes an epoch, compile seconds (mtkit/train/compile.py)
        length_buckets=t.cfg.length_buckets,
        pad_eff=round(both, 4),
    )
    t.log.event(
        "data",
        sentences=len(t.train_split),
        batches=len(t.plan),
        batches_per_rank=len(t.plan) // world.size,
        skipped=t.plan.skipped,
        pad_eff_src=round(src_eff, 4),
        pad_eff_tgt=round(tgt_eff, 4),
        pad_eff=round(both, 4),
        valid_sentences=len(t.valid_split),
    )
    if t.resumed_from is not None:
        t.log.event("resume", step=p.step, epoch=p.epoch + 1, batch=p.batch)


def train_line(t: Trainer, w: Window) -> None:
    """One train record over the updates since the last one (on a terminal: the progress bar's postfix)."""
    cfg, p = t.cfg, t.progress
    nll = w.nll / max(w.tgt, 1)
    s_per_update = w.seconds / max(w.updates, 1)
    eta_s = (cfg.max_steps - p.step) * s_per_update
    if cfg.max_minutes:  # a wall-clock budget may end the run long before max_steps
        eta_s = min(eta_s, max(0.0, 60 * cfg.max_minutes - p.elapsed))
    t.log.event(
        "train",
        quiet_on_tty=True,
        step=p.step,
        epoch=p.epoch + 1,
        loss=w.loss / max(w.tgt, 1),
        nll=nll,
        ppl=math.exp(min(nll, 100.0)),
        lr=t.lr,
        grad_norm=w.grad_norm(),
        tokens_per_s=w.real / max(w.seconds, 1e-9),
        pad_eff=w.real / max(w.padded, 1),
        s_per_update=s_per_update,
        eta_h=round(eta_s / 3600, 3),
    )


def done(t: Trainer, stopped: str) -> None:
    """The run's last record: how far it got, why it stopped, its best validation score."""
    p = t.progress
    best: dict[str, Any] = {"best_bleu": -p.best} if t.bleu_sample is not None else {"best_nll": p.best}
    # After a signal the CLI says the one line; the record still goes to metrics.jsonl.
    level = logging.DEBUG if stopped in SIGNAL_STOPS else logging.INFO
    t.log.event(
        "done", level=level, step=p.step, epochs_done=p.epoch, stopped=stopped, **best, hours=round(p.elapsed / 3600, 4)
    )
