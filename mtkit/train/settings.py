"""A run's settings, finished before anything is built from them: `settle`, which `train()` calls once.

Every "auto" of a run is resolved here, in one order, each with its reason (the first log line prints them):
a resumed run's kept --max-tokens (mtkit/train/resume.py) first; then the model with its starting weights
(the checkpoint it resumes, or --init's: `start_weights`, before anything else touches it), --compile
(mtkit/train/compile.py) and the batch shapes it wants, the runtime (precision and the fp32 CPU products'
backend: mtkit.runtime, measured on rank 0 and shared, or kept from the checkpoint a run resumes), --max-tokens
auto (mtkit/train/probe.py, which needs the model on its device computing as the runtime says), and last the
world size's update_freq (`TrainConfig.for_world`, run here once, max_tokens a number by then). The result,
`RunSettings`, is frozen: the `Trainer` is built from it and never rewrites it (fairseq's fairseq_cli/train.py
finishes its settings the same way before it builds a trainer).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mtkit import runtime
from mtkit.config import ModelConfig, TrainConfig
from mtkit.heap import keep_freed_memory
from mtkit.model import Transformer
from mtkit.train import compile as compile_step
from mtkit.train import distributed as dist
from mtkit.train import probe
from mtkit.train.finetune import Start, start_weights
from mtkit.train.plan import TrainingData
from mtkit.train.precision import Precision
from mtkit.train.resume import kept_max_tokens, kept_runtime


@dataclass(frozen=True)
class RunSettings:
    """What a run trains with, every "auto" resolved, and why (the first log line)."""

    cfg: TrainConfig  # resolved: max_tokens an integer, update_freq derived, length_buckets none | ladder | x8,
    #                   precision fp32 | bf16 | fp16, compile on | off (what the run started with)
    runtime: runtime.Runtime  # precision and the fp32 CPU products' backend, each with its reason
    compiling: compile_step.CompileChoice  # whether the step is compiled, its mode, why
    cpu_heap: tuple[str, str]  # how freed memory is kept (mtkit/heap.py), and why
    reasons: dict[str, Any]  # the first log line's other reasons: runtime_from, max_tokens_why


def settle(
    cfg: TrainConfig,
    model_cfg: ModelConfig,
    data: TrainingData,
    world: dist.World,
    ckpt: dict[str, Any] | None,
    init: Start | None = None,
) -> tuple[RunSettings, Transformer]:
    """The run's settings and its model (seeded, its starting weights in it, on its device, computing as the
    runtime says; the probe of --max-tokens auto needs it). `cfg` is the user's config (auto included); `ckpt` the
    checkpoint it resumes (whose --max-tokens auto and runtime decisions it keeps), `init` the model a new run
    starts from (neither: the seeded initialisation)."""
    if ckpt is not None:
        cfg = kept_max_tokens(cfg, ckpt)  # the batch the run resolved at its start, not a new probe's answer
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)  # same initial weights on every rank (DDP broadcasts rank 0's anyway)
    device = world.device
    # CPU training reuses the memory it frees (mtkit/heap.py): before the first large tensor is made.
    heap = keep_freed_memory() if device.type == "cpu" else ("default", f"{device.type} training")
    model = Transformer(model_cfg)
    start_weights(model, ckpt["model"] if ckpt is not None else None, init)
    model = model.to(device)
    compiling = compile_step.decide(cfg.compile, device, world.size)
    cfg = compile_step.resolve_buckets(cfg, compiling)  # the batch shapes a compiled step wants
    decided = kept_runtime(ckpt, cfg.precision, device, compiling.on)
    runtime_from = "the checkpoint: decided at the run's start" if decided else "decided at this start"
    batch = cfg.max_tokens if isinstance(cfg.max_tokens, int) else None  # a GPU's bf16 pass is of the run's batch
    if decided is None:  # measured on rank 0 only and shared: ranks timing at once would skew it, and must agree
        decided = dist.decided_by_main(
            lambda: runtime.decide_training(cfg.precision, device, model_cfg, compiled=compiling.on, tokens=batch),
            world,
        )
    runtime.apply(model, decided)
    tokens = probe.resolve(cfg, model, Precision(decided, device), data.train, world, model_cfg.max_positions)
    reasons = {"runtime_from": runtime_from, **tokens.fields}
    cfg = tokens.cfg.for_world(world.size)  # the one place: max_tokens is a number from here on
    # The finished settings hold decisions, never "auto": what the run computes in and whether its step compiles
    # (config.json and every checkpoint record them; a resume decides "auto" afresh, mtkit/train/resume.py).
    cfg = dataclasses.replace(cfg, precision=decided.precision, compile="on" if compiling.on else "off")
    return RunSettings(cfg, decided, compiling, heap, reasons), model
