"""The trainer's records: config.json and run.json, the start of a run, a train line every --log-every updates,
and its end.

Every record goes to metrics.jsonl and (as one line) to the log through `MetricsLog`. The
functions take the values they write (a `Setup`, the `Progress`), never the trainer.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mtkit import provenance
from mtkit.atomic import write_atomic
from mtkit.config import ModelConfig, TrainConfig
from mtkit.data.batching import BatchPlan, padding_efficiency
from mtkit.data.dataset import DataDir
from mtkit.runtime import Runtime
from mtkit.train.distributed import World
from mtkit.train.metrics import MetricsLog, Window
from mtkit.train.progress import Progress
from mtkit.train.signals import SIGNAL_STOPS

logger = logging.getLogger(__name__)


def write_run_files(
    run_dir: Path,
    model_cfg: ModelConfig,
    cfg: TrainConfig,
    data: DataDir,
    world: World,
    precision: str,
    step: int,
    started_from: dict[str, Any] | None = None,
    runtime: Runtime | None = None,
) -> dict[str, Any]:
    """Rank 0, as training starts: RUN/config.json (the resolved configs) and RUN/run.json (provenance.start_run,
    whose record is returned: every checkpoint carries it), with the `runtime`'s decisions, each with its reason."""
    config = {
        "model": dataclasses.asdict(model_cfg),
        "train": dataclasses.asdict(cfg),
        "data": str(data.path.resolve()),
        "world_size": world.size,
    }
    write_atomic(run_dir / "config.json", json.dumps(config, indent=2) + "\n")
    return provenance.start_run(
        run_dir,
        data.path,
        data.src_lang,
        data.tgt_lang,
        device=world.device,
        threads=torch.get_num_threads(),
        precision=precision,
        world_size=world.size,
        start_step=step,
        started_from=started_from,
        decisions=None
        if runtime is None
        else {"precision": [runtime.precision, runtime.why], "fp32_matmul": [runtime.matmul, runtime.matmul_why]},
    )


def nothing_to_do(run_dir: Path, p: Progress, finished: str) -> None:
    """A rerun of a finished run: where it ended and why (it touches nothing)."""
    logger.info(
        "nothing to do: the run in %s finished at step %d, epoch %d, %.1f minutes (%s); raise that limit to train on",
        run_dir,
        p.step,
        p.epoch,
        p.elapsed / 60,
        finished,
    )


@dataclass(frozen=True)
class Setup:
    """What the run's first records say about it, fixed once the trainer is built."""

    params: int
    world: World  # the device, and how many ranks
    cfg: TrainConfig  # update_freq, max_tokens
    precision: tuple[str, str]  # the precision trained in, and why
    fp32_matmul: tuple[str, str]  # the fp32 products' backend, and why
    cpu_heap: tuple[str, str]  # how freed memory is kept (mtkit/heap.py), and why
    batch_plan: BatchPlan
    sentences: int
    valid_sentences: int
    # Start-time decisions: where the runtime came from (mtkit/train/settings.py); --compile's outcome,
    # the batch shapes an epoch, compile seconds (mtkit/train/compile.py);
    # what --max-tokens auto resolved to, and why (mtkit/train/probe.py).
    decided: dict[str, Any]


def start(log: MetricsLog, setup: Setup, resumed: Progress | None) -> None:
    """The run's first records: model, device and batch size; the data plan; where a resumed run continues."""
    s, plan, world_size = setup, setup.batch_plan, setup.world.size
    update_freq, max_tokens = s.cfg.update_freq, s.cfg.max_tokens
    per_update = update_freq * world_size
    real = (plan.src_tokens.mean() + plan.tgt_tokens.mean()) / 2 * per_update
    src_eff, tgt_eff, both = padding_efficiency(plan)
    log.event(
        "start",
        params=s.params,
        device=str(s.world.device),
        precision=s.precision[0],
        precision_why=s.precision[1],
        fp32_matmul=s.fp32_matmul[0],
        fp32_matmul_why=s.fp32_matmul[1],
        cpu_heap=s.cpu_heap[0],
        cpu_heap_why=s.cpu_heap[1],
        world_size=world_size,
        effective_batch=f"{update_freq} x {max_tokens:,} tokens x {world_size} rank(s) "
        f"= up to {max_tokens * per_update:,} tokens per side, "
        f"about {real:,.0f} real",
        update_freq=update_freq,
        max_tokens=max_tokens,  # an integer: auto is resolved by then (mtkit/train/probe.py)
        torch_threads=torch.get_num_threads(),
        **s.decided,  # compile, why, batch shapes an epoch, compile seconds; max_tokens_why
        length_buckets=s.cfg.length_buckets,
        pad_eff=round(both, 4),
    )
    log.event(
        "data",
        sentences=s.sentences,
        batches=len(plan),
        batches_per_rank=len(plan) // world_size,
        skipped=plan.skipped,
        pad_eff_src=round(src_eff, 4),
        pad_eff_tgt=round(tgt_eff, 4),
        pad_eff=round(both, 4),
        valid_sentences=s.valid_sentences,
    )
    if resumed is not None:
        log.event("resume", step=resumed.step, epoch=resumed.epoch + 1, batch=resumed.batch)


def train_line(log: MetricsLog, w: Window, p: Progress, cfg: TrainConfig, lr: float) -> None:
    """One train record over the updates since the last one (on a terminal: the progress bar's postfix)."""
    nll = w.nll / max(w.tgt, 1)
    s_per_update = w.seconds / max(w.updates, 1)
    eta_s = (cfg.max_steps - p.step) * s_per_update
    if cfg.max_minutes:  # a wall-clock budget may end the run long before max_steps
        eta_s = min(eta_s, max(0.0, 60 * cfg.max_minutes - p.elapsed))
    log.event(
        "train",
        quiet_on_tty=True,
        step=p.step,
        epoch=p.epoch + 1,
        loss=w.loss / max(w.tgt, 1),
        nll=nll,
        ppl=math.exp(min(nll, 100.0)),
        lr=lr,
        grad_norm=w.grad_norm(),
        tokens_per_s=w.real / max(w.seconds, 1e-9),
        tgt_tokens_per_s=w.tgt / max(w.seconds, 1e-9),  # fairseq's wps: non-pad target tokens, EOS included
        pad_eff=w.real / max(w.padded, 1),
        s_per_update=s_per_update,
        eta_h=round(eta_s / 3600, 3),
    )


def done(log: MetricsLog, p: Progress, stopped: str, by_bleu: bool) -> None:
    """The run's last record: how far it got, why it stopped, its best validation score (BLEU when `by_bleu`)."""
    best: dict[str, Any] = {"best_bleu": -p.best} if by_bleu else {"best_nll": p.best}
    # After a signal the CLI says the one line; the record still goes to metrics.jsonl.
    level = logging.DEBUG if stopped in SIGNAL_STOPS else logging.INFO
    log.event(
        "done", level=level, step=p.step, epochs_done=p.epoch, stopped=stopped, **best, hours=round(p.elapsed / 3600, 4)
    )
