"""Mixed precision: bf16 autocast, or fp16 with a dynamic loss scaler that skips overflowing steps.

Not in the paper (it trained in fp32 on P100s); the choices follow PyTorch's AMP recipes:
weights and optimizer state stay fp32, matrix products run in the low-precision type, and
the loss (mtkit.train.loss) is always computed in fp32.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from contextlib import AbstractContextManager
from typing import NamedTuple

import torch
import torch.nn.functional as F

from mtkit.config import ModelConfig
from mtkit.errors import MtkitError
from mtkit.model.linear import adopt, cap_kernel_caches, onednn_linear, onednn_works, use_best_backend

logger = logging.getLogger(__name__)

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# oneDNN keeps up to 1024 compiled primitives (with their scratch buffers), one set per batch
# shape, and PyTorch's ideep layer as many again in an LRU cache of its own; token-bucketed batches
# have hundreds of shapes, which is how bf16 training's RSS grew by ~1 GiB (issue 9), and fp32's
# once its products went through oneDNN too. Capped for CPU training before the first oneDNN kernel
# runs (both are read once; mtkit.model.linear.cap_kernel_caches). oneDNN's at 16 measured 460 MB
# less than 1024 for `small` in fp32 at the same speed (`bench/train_throughput.py --preset small`,
# 2-core AMD EPYC, Zen 5); ideep's at 64, 600 MB less than 1024 on a Zen 4 in fp32 through oneDNN
# (2,156-2,220 -> 1,568-1,584 MB, the recipe's Multi30k data), at the same speed (2,977 vs 2,975
# target tokens/s; 32: 1,497 MB, ~6% slower, since one update's ~30 product shapes no longer fit).
ONEDNN_CACHE_CAPACITY, IDEEP_CACHE_CAPACITY = 16, 64
# How much faster bf16 must measure for auto to take it. A training pass leaves out what costs the same
# in both (the optimizer step, the data) and meets fewer shapes than a run: on a 2-core AMD EPYC its
# ratio was 1.12 for `small` where whole updates measured 0.93 (fp32 faster), 1.35 for `base` (1.30).
MIN_PRODUCT_SPEEDUP, MIN_PASS_SPEEDUP = 1.1, 1.2
AUTO_ENV = "MTKIT_AUTO_PRECISION"  # pins what "auto" resolves to (the tests set fp32, for the same results anywhere)


def cpu_has_native_bf16() -> bool:
    """oneDNN's own test for bf16 instructions (AVX512-BF16 or AMX): the only CPUs where bf16 autocast helps."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


@functools.cache
def bf16_matmul_speedup(d_model: int = 512) -> float:
    """fp32 time / bf16 time of a feed-forward-sized product (2048 x d_model x 4 d_model), best of 3 each.

    fp32 counts its faster backend (mtkit/model/linear.py: PyTorch's default or oneDNN), the one
    an fp32 run would use: bf16 must beat that, not MKL's generic code.
    """
    x = torch.randn(2048, d_model)
    w = torch.randn(4 * d_model, d_model)
    kernels = {"fp32": F.linear, "bf16": F.linear}
    if onednn_works():
        kernels["fp32 oneDNN"] = onednn_linear
    best = dict.fromkeys(kernels, float("inf"))
    with torch.no_grad():
        for _ in range(3):
            for name, kernel in kernels.items():
                dtype = torch.bfloat16 if name == "bf16" else torch.float32
                a, b = x.to(dtype), w.to(dtype)
                start = time.perf_counter()
                kernel(a, b, None)
                best[name] = min(best[name], time.perf_counter() - start)
    fp32 = min(t for name, t in best.items() if name != "bf16")
    return fp32 / best["bf16"]


@functools.cache
def bf16_update_speedup(cfg: ModelConfig, tokens: int = 2048) -> float:
    """fp32 time / bf16 time of a training pass (forward, loss, backward) of this model on a synthetic batch.

    The matrix products alone overstate bf16's gain once fp32's run through oneDNN: for `small`
    (d_model 256) they measured 1.8x, training 0.93x (fp32 faster). Each pass has a new sentence
    length, as token-bucketed batches do (oneDNN compiles kernels per shape, and bf16's cost more),
    `tokens` a side; the first pass is not timed; fp32 through the backend an fp32 run would use.
    Torch's RNG is left as it was: training's seed decides the weights, not this measurement.
    """
    from mtkit.model.transformer import Transformer
    from mtkit.train.loss import label_smoothed_sums

    seconds = {}
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = Transformer(cfg).train()
        for name in ("fp32", "bf16"):
            seconds[name] = 0.0
            for i, length in enumerate((29, 31, 33, 35)):
                src = torch.randint(4, cfg.vocab_size, (max(1, tokens // length), length))
                tgt = torch.randint(4, cfg.target_vocab_size, src.shape)
                start = time.perf_counter()
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=name == "bf16"):
                    logits = model(src, tgt)
                label_smoothed_sums(logits, tgt, 0.1)[0].backward()
                model.zero_grad(set_to_none=True)
                seconds[name] += (time.perf_counter() - start) if i else 0.0
    return seconds["fp32"] / seconds["bf16"]


def resolve_precision(
    precision: str, device: torch.device, d_model: int = 512, model: ModelConfig | None = None
) -> tuple[str, str]:
    """The one rule for training and translation: (fp32 | bf16 | fp16, why), "auto" resolved for this device.

    auto = bf16 on a CUDA GPU that supports it; on a CPU, bf16 only when the CPU has native bf16
    instructions (AVX512-BF16 or AMX; without them bf16 is emulated and ~20x slower) AND bf16
    measures faster: a training pass of `model` when given (training; by MIN_PASS_SPEEDUP), else
    a matrix product of width d_model (translation; by MIN_PRODUCT_SPEEDUP); fp32 everywhere else.
    """
    if precision not in TORCH_DTYPES and precision != "auto":
        raise MtkitError(f"unknown precision {precision!r}; choose one of: auto, {', '.join(TORCH_DTYPES)}.")
    if precision == "fp16" and device.type != "cuda":
        raise MtkitError("precision fp16 needs a CUDA device; use fp32 or bf16 on the CPU.")
    if precision != "auto":
        return precision, "asked for"
    pinned = os.environ.get(AUTO_ENV)
    if pinned in ("fp32", "bf16"):
        return pinned, f"{AUTO_ENV}={pinned}"
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return "bf16", f"{torch.cuda.get_device_name(device)} supports bf16"
        return "fp32", f"{torch.cuda.get_device_name(device)} has no bf16"
    if device.type != "cpu":
        return "fp32", f"auto picks fp32 on {device.type}"
    return _resolve_cpu(d_model, model)


def _resolve_cpu(d_model: int, model: ModelConfig | None) -> tuple[str, str]:
    capability = torch.backends.cpu.get_cpu_capability()
    if not cpu_has_native_bf16():
        return "fp32", f"this CPU ({capability}) has no AVX512-BF16 or AMX instructions"
    speedup = bf16_matmul_speedup(d_model) if model is None else bf16_update_speedup(model)
    what = "a matrix product" if model is None else "a training pass"
    if speedup < (MIN_PRODUCT_SPEEDUP if model is None else MIN_PASS_SPEEDUP):
        return "fp32", f"this CPU ({capability}) has native bf16, but {what} measured only {speedup:.2f}x fp32 in bf16"
    return "bf16", f"this CPU ({capability}) has native bf16 and {what} measured {speedup:.2f}x fp32 in bf16"


class Choice(NamedTuple):
    """What training computes in, and the fp32 CPU products' backend, each with its reason (the start line)."""

    precision: str
    why: str
    matmul: str
    matmul_why: str


def choose(name: str, device: torch.device, d_model: int = 512, model: ModelConfig | None = None) -> Choice:
    """Resolve `name` (auto included) and the fp32 backend for this device, measuring where the rule says so.

    `model`: the configuration being trained, for auto's measurement (d_model alone: a matrix product).
    Under torchrun rank 0 alone calls this and every rank adopts its answer (distributed.decided_by_main).
    """
    _check_device(name, device)
    # fp32 products (all of fp32 training; under bf16 autocast only what autocast leaves in fp32)
    # through the faster CPU backend, measured once per process. Chosen first, so that auto's
    # measurement times fp32 as an fp32 run would compute it.
    d_model = model.d_model if model is not None else d_model
    matmul, matmul_why = use_best_backend(device, d_model, training=True)
    return Choice(*resolve_precision(name, device, d_model, model), matmul, matmul_why)


def _check_device(name: str, device: torch.device) -> None:
    """fp16 is refused on a CPU; CPU training caps oneDNN's kernel caches before its first kernel runs."""
    if name == "fp16" and device.type == "cpu":
        raise MtkitError(
            "--precision fp16 needs a CUDA device (CPU kernels are not faster in fp16); "
            "use --precision bf16 or fp32 on CPU."
        )
    if device.type == "cpu":
        cap_kernel_caches(IDEEP_CACHE_CAPACITY, ONEDNN_CACHE_CAPACITY)


class Precision:
    """The autocast context and (fp16 only) the GradScaler for one device."""

    def __init__(
        self,
        name: str,
        device: torch.device,
        d_model: int = 512,
        model: ModelConfig | None = None,
        choice: Choice | None = None,
    ):
        """`choice`: made already (rank 0's, under torchrun); else made here by `choose(name, device, ...)`."""
        if choice is None:
            choice = choose(name, device, d_model, model)
        else:  # made on rank 0: this rank still refuses fp16 on a CPU and caps its own oneDNN caches
            _check_device(name, device)
        adopt((choice.matmul, choice.matmul_why))
        self.matmul, self.matmul_reason = choice.matmul, choice.matmul_why  # the first log line shows both pairs
        self.name, self.reason = choice.precision, choice.why
        self.device = device
        name = self.name
        if name == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise MtkitError(f"{torch.cuda.get_device_name(device)} has no bf16 support; use --precision fp16 or fp32.")
        if name == "bf16" and device.type == "cpu" and not cpu_has_native_bf16():
            # Measured on an AVX2-only EPYC: `small` took 44 s per update in bf16 against 2 s in fp32.
            raise MtkitError(
                "--precision bf16 is about 20x slower than fp32 on this CPU (it has no AVX512-BF16 or "
                "AMX instructions); use --precision fp32."
            )
        # GradScaler's skip-on-overflow is exactly "skip overflowing steps rather than crash".
        self.scaler = torch.amp.GradScaler(device.type) if name == "fp16" else None

    def autocast(self) -> AbstractContextManager:
        if self.name == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=DTYPES[self.name])

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def unscale(self, optimizer: torch.optim.Optimizer) -> None:
        """Before clipping: gradients must be in true units to compare with --clip-norm."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer) -> bool:
        """Apply the update; False when fp16 gradients overflowed and the scaler skipped it."""
        if self.scaler is None:
            optimizer.step()
            return True
        before = self.scaler.get_scale()
        self.scaler.step(optimizer)
        self.scaler.update()
        skipped = self.scaler.get_scale() < before  # the scale only drops on overflow
        if skipped:
            logger.warning("fp16 gradients overflowed; update skipped, loss scale now %g", self.scaler.get_scale())
        return not skipped

    def skip(self) -> None:
        """An update not taken after `unscale` (non-finite loss): fp16's scaler closes it and lowers its scale."""
        if self.scaler is not None:
            self.scaler.update()

    def state_dict(self) -> dict | None:
        return self.scaler.state_dict() if self.scaler is not None else None

    def load_state_dict(self, state: dict | None) -> None:
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)
