"""torch.compile of the training step (the model and the loss), decided once per run like --precision auto.

Not in the paper: an engineering choice. On a GPU an eager update is hundreds of small kernel launches
(a profile of `base` on a GPU found a quarter of the CPU's time launching kernels); compiled, the forward and
backward passes are a few fused kernels, and with mode "reduce-overhead" each batch shape's step is
recorded once as a CUDA graph and replayed. Shapes are what a compiled step specialises on, so a
compiling run pads its batches to a few bucket lengths (mtkit/data/batching.py, --length-buckets) and
compiles with dynamic sizes: one compilation serves every bucket, and CUDA graphs are recorded per
bucket, a number the first log line announces.

`auto` takes only what has been measured: eager on a CUDA GPU, where the one run of bench/gpu_run.sh (an H200)
never finished a compiled step (GPU_WHY, the first log line says), always eager under DDP
(torchrun, more than one rank: CUDA graphs and DDP's gradient hooks are a known source of trouble), and on
the CPU off. `--compile on` compiles wherever it is asked. A compilation that fails, while compiling or in
any later update, falls back (`fall_back`): under auto with one warning naming the cause, the run
going on eagerly from the same update (its gradients dropped and its batches redone); under on it stops
with one sentence naming the cause and `--compile off`.

On the CPU `auto` stays off. Inductor lowers oneDNN's linear op (mtkit/kernels/linear.py) only for frozen
inference weights (its lowering asserts the weight is a constant), so a compiled CPU step runs its
products through PyTorch's default kernels (MKL) instead, losing oneDNN's speedup where it was chosen,
and compiling takes minutes even for a 1+1-layer model on a small CPU. `--compile on`
still works there (the tests compare it with eager), with a C++ compiler.

A compiled step is one graph per function (the model's forward, the loss), with no break: while traced
(`torch.compiler.is_compiling()`) the CPU kernels take plain ops that inductor lowers and fuses (F.linear
for oneDNN's product, F.dropout for the integer-draw mask, mtkit/kernels), the encoder always masks
padding instead of asking whether there is any (a data-dependent branch), and the loss is `plain_sums`
(mtkit/train/loss.py). Eager runs never take those branches. With dynamic sizes that is one compilation
of each, whatever the number of bucket shapes (before, ~14 graphs a forward and ~350 s to compile).

The model is never changed: the step compiles a wrapper (torch.compile returns a new module around it),
so checkpoints, which save the model itself, hold no `_orig_mod.` keys and load in any uncompiled model.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import time
from typing import Any, NamedTuple

import numpy as np
import torch

from mtkit.config import TrainConfig
from mtkit.data.batching import BatchPlan, shape_count
from mtkit.data.dataset import ParallelSplit
from mtkit.errors import MtkitError
from mtkit.train.forward import LossSums, batch_loss
from mtkit.train.loss import plain_sums
from mtkit.train.precision import Precision

logger = logging.getLogger(__name__)

AUTO_ENV = "MTKIT_AUTO_COMPILE"  # pins what "auto" resolves to: on | off
MODE_ENV = "MTKIT_COMPILE_MODE"  # another torch.compile mode, e.g. max-autotune-no-cudagraphs (measurements)
DYNAMIC_ENV = "MTKIT_COMPILE_DYNAMIC"  # 0: one specialised compilation per batch shape (measurements)
COMPILER_MODULES = ("torch._dynamo", "torch._inductor", "torch._functorch", "triton")  # whose errors fall back
COMPILER_FILES = ("torch/_dynamo/", "torch/_inductor/", "torch/_functorch/", "/triton/")
CUDA_MODE = "reduce-overhead"  # CUDA graphs: one recording per batch shape, replayed
# What GPU_WHY and CPU_WHY say was measured: docs/benchmarks.md, "Figures behind the code's choices", this module. The
# next GPU run compiles without CUDA graphs
# (COMPILE_MODE, the bench's exit status).
GPU_WHY = (
    "on an H200 (bench/gpu_run.sh) the compiled step took over 2 minutes to compile and then died without an "
    "error: eager; --compile on"
)
CPU_WHY = (
    "on the CPU a compiled step runs its products through MKL (inductor cannot lower oneDNN's linear for trained "
    "weights), takes minutes to compile and measured 0.45x eager for small"
)


class CompileChoice(NamedTuple):
    """Whether the step is compiled, with which torch.compile mode, and why (the first log line)."""

    on: bool
    mode: str | None
    why: str
    asked: str = "auto"  # the --compile setting it resolves (auto | on | off): what a failure does (`fall_back`)


def cxx_compiler() -> str | None:
    """The C++ compiler inductor builds CPU kernels with ($CXX, else g++), or None when there is none."""
    return shutil.which(os.environ.get("CXX", "g++"))


def decide(setting: str, device: torch.device, world_size: int = 1) -> CompileChoice:
    """Resolve --compile (auto | on | off) for `device` and `world_size` ranks; see the module docstring for auto."""
    mode = os.environ.get(MODE_ENV) or (CUDA_MODE if device.type == "cuda" else None)
    if setting == "auto":
        if world_size > 1:
            return CompileChoice(False, None, f"not measured under DDP ({world_size} ranks): eager; --compile on")
        pinned = os.environ.get(AUTO_ENV)
        if pinned in ("on", "off"):
            return CompileChoice(pinned == "on", mode if pinned == "on" else None, f"{AUTO_ENV}={pinned}")
        if device.type == "cuda":
            return CompileChoice(False, None, GPU_WHY)
        return CompileChoice(False, None, CPU_WHY if device.type == "cpu" else f"not tried on {device.type}")
    if setting == "off":
        return CompileChoice(False, None, "asked for", setting)
    if setting != "on":
        raise MtkitError(f"unknown --compile {setting!r}; choose one of: auto, on, off.")
    if device.type == "cpu" and cxx_compiler() is None:
        raise MtkitError("--compile on needs a C++ compiler on the CPU (g++ or $CXX); install one, or --compile off.")
    return CompileChoice(True, mode, "asked for", setting)


def is_compile_failure(exc: BaseException) -> bool:
    """Whether `exc`, raised where the compiled step ran, is the compiler's: an error of TorchDynamo, inductor or
    Triton (its class, or a frame of theirs it passed through: a CUDA graph refused, a kernel that failed to
    build), never running out of memory (the trainer's own sentence says what to change)."""
    if isinstance(exc, (torch.OutOfMemoryError, MtkitError)) or not isinstance(exc, Exception):
        return False
    if "can't allocate memory" in str(exc):
        return False
    if type(exc).__module__.startswith(COMPILER_MODULES):
        return True
    frame = exc.__traceback__
    while frame is not None:
        if any(part in frame.tb_frame.f_code.co_filename.replace(os.sep, "/") for part in COMPILER_FILES):
            return True
        frame = frame.tb_next
    return False


def cause_of(exc: BaseException) -> str:
    """What went wrong, in one line: the exception's class and message (a wrapped one's, for TorchDynamo's)."""
    inner = getattr(exc, "inner_exception", None)
    said = f"{type(inner).__name__}: {inner}" if isinstance(inner, BaseException) else str(exc)
    return f"{type(exc).__name__}: {' '.join(said.split())[:200] or 'no message'}"


def fall_back(choice: CompileChoice, exc: BaseException, where: str) -> CompileChoice:
    """The eager choice after the compiled step failed `where`: auto warns once and goes on; on stops (MtkitError)."""
    cause = cause_of(exc)
    if choice.asked == "on":
        raise MtkitError(f"torch.compile failed {where} ({cause}); rerun with --compile off.") from None
    logger.warning("torch.compile failed %s (%s); going on eagerly from the same update", where, cause)
    return CompileChoice(False, None, f"fell back to eager: torch.compile failed {where} ({cause})", choice.asked)


def resolve_buckets(cfg: TrainConfig, choice: CompileChoice) -> TrainConfig:
    """--length-buckets auto: the ladder when compiling (few shapes), none otherwise (least padding)."""
    if cfg.length_buckets != "auto":
        return cfg
    return dataclasses.replace(cfg, length_buckets="ladder" if choice.on else "none")


class CompiledStep:
    """The compiled model (or DDP module) as the trainer calls it: marks each CUDA-graph step, delegates the rest."""

    def __init__(self, module: torch.nn.Module, compiled: Any, graphs: bool):
        self.module, self.compiled, self.graphs = module, compiled, graphs

    def __call__(self, *args: Any) -> Any:
        if self.graphs:  # each call is a new step: outputs of the last one may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        return self.compiled(*args)

    def __getattr__(self, name: str) -> Any:  # no_sync (DDP), parameters, ...
        return getattr(self.module, name)


class Compiled(NamedTuple):
    """The step the trainer calls, its loss (None: mtkit/train/loss.py's), the first log line's fields, and the
    choice it ran under (eager after a fall back)."""

    step: Any
    loss_sums: LossSums | None
    fields: dict[str, Any]
    choice: CompileChoice


def eager_after(failed: Compiled, exc: BaseException, where: str) -> Compiled:
    """The eager step after `failed`'s compiled step raised `exc` `where` (`fall_back`: auto warns, on stops)."""
    eager = fall_back(failed.choice, exc, where)
    return Compiled(failed.step.module, None, {**failed.fields, "compile": "off", "compile_why": eager.why}, eager)


def apply(
    module: torch.nn.Module,
    choice: CompileChoice,
    batch_plan: BatchPlan,
    split: ParallelSplit,
    precision: Precision,
    smoothing: float,
) -> Compiled:
    """`module` (the model or its DDP wrapper) and the loss compiled where `choice` says so, and compiled now:
    forward and backward of the plan's longest batch, RNG untouched, gradients dropped. A compilation that
    fails falls back (`fall_back`): the fields then say compile off, and why."""
    shapes = shape_count(batch_plan)
    fields: dict[str, Any] = {"compile": "on" if choice.on else "off", "compile_why": choice.why, "shapes": shapes}
    if not choice.on:
        return Compiled(module, None, fields, choice)
    limit = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = max(limit, shapes + 2)  # a static compilation per shape fits too
    dynamic = os.environ.get(DYNAMIC_ENV) != "0"
    compiled = torch.compile(module, mode=choice.mode, dynamic=dynamic)
    step = CompiledStep(module, compiled, graphs=choice.mode == CUDA_MODE and precision.device.type == "cuda")
    loss_sums = torch.compile(plain_sums, mode=choice.mode, dynamic=dynamic)
    compiled = Compiled(step, loss_sums, fields, choice)
    try:
        seconds = warm_up(step, loss_sums, batch_plan, split, precision, smoothing, precision.device)
    except Exception as exc:
        if not is_compile_failure(exc):
            raise
        module.zero_grad(set_to_none=True)
        return eager_after(compiled, exc, "while compiling")
    module.zero_grad(set_to_none=True)
    fields.update(compile_mode=choice.mode or "default", compile_s=round(seconds, 1))
    logger.debug("compiled the training step in %.1f s (%d batch shapes an epoch)", seconds, shapes)
    return compiled


def warm_up(
    step: Any,
    loss_sums: LossSums,
    batch_plan: BatchPlan,
    split: ParallelSplit,
    precision: Precision,
    smoothing: float,
    device: torch.device,
) -> float:
    """Seconds to compile: forward and backward of the plan's longest batch (its gradients are then dropped).

    The RNG is forked (dropout draws nothing from the run's stream) and no parameter changes, so the run
    is the one it would have been; a resumed run stays exact.
    """
    lengths = batch_plan.src_padded + batch_plan.tgt_padded
    if not len(batch_plan):
        return 0.0
    longest = batch_plan.batches[int(np.argmax(lengths))]
    devices = [device] if device.type == "cuda" else []
    start = time.perf_counter()
    with torch.random.fork_rng(devices=devices):
        loss, _, _ = batch_loss(step, split, longest, precision, smoothing, device, loss_sums)
        (loss * 0.0).backward()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def compilations() -> int:
    """Frames torch.compile has compiled in this process so far (first compilations and recompilations)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])
