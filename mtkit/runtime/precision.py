"""The precision rule, one for training and translation: "auto" resolved for a device, explicit choices checked.

Not in the paper (it trained in fp32 on P100s). Mixed precision follows PyTorch's AMP recipes
(mtkit/train/precision.py applies it); this module says which precision a run computes in.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from mtkit.config import ModelConfig, TrainConfig
from mtkit.errors import MtkitError
from mtkit.kernels.linear import onednn_linear
from mtkit.precision import PRECISION_CHOICES, check_precision, torch_dtype
from mtkit.runtime.decision import Runtime, apply
from mtkit.runtime.int8 import int8_available
from mtkit.runtime.matmul import onednn_works

logger = logging.getLogger(__name__)

# How much faster bf16 must measure for auto to take it. A training pass leaves out what costs the same
# in both (the optimizer step, the data) and meets fewer shapes than a run: on a 2-core AMD EPYC its
# ratio was 1.12 for `small` where whole updates measured 0.93 (fp32 faster), 1.35 for `base` (1.30).
MIN_PRODUCT_SPEEDUP, MIN_PASS_SPEEDUP = 1.1, 1.2
AUTO_ENV = "MTKIT_AUTO_PRECISION"  # pins what "auto" resolves to (the tests set fp32, for the same results anywhere)

Loss = Callable[[Tensor, Tensor], Tensor]  # (logits (B, T, V), targets (B, T)) -> the loss of a training pass


def cpu_has_native_bf16() -> bool:
    """oneDNN's own test for bf16 instructions (AVX512-BF16 or AMX): the only CPUs where bf16 autocast helps."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


@functools.cache
def bf16_matmul_speedup(d_model: int = 512) -> float:
    """fp32 time / bf16 time of a feed-forward-sized product (2048 x d_model x 4 d_model), best of 3 each.

    fp32 counts its faster backend (PyTorch's default or oneDNN, mtkit/runtime/matmul.py), the one
    an fp32 run would use: bf16 must beat that, not MKL's generic code.
    """
    x = torch.randn(2048, d_model)
    w = torch.randn(4 * d_model, d_model)
    kernels: dict[str, Callable[..., Tensor]] = {"fp32": F.linear, "bf16": F.linear}
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


def smoothed_cross_entropy(logits: Tensor, target: Tensor) -> Tensor:
    """The stand-in training loss that `bf16_update_speedup` times: label-smoothed cross-entropy in fp32, with
    training's default epsilon (the ratio of fp32 to bf16 time does not depend on it)."""
    smoothing = TrainConfig().label_smoothing
    return F.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), label_smoothing=smoothing, reduction="sum")


@functools.cache
def bf16_update_speedup(
    cfg: ModelConfig, loss: Loss = smoothed_cross_entropy, matmul: str = "default", tokens: int = 2048
) -> float:
    """fp32 time / bf16 time of a training pass (forward, loss, backward) of this model on a synthetic batch.

    The matrix products alone overstate bf16's gain once fp32's run through oneDNN: for `small`
    (d_model 256) they measured 1.8x, training 0.93x (fp32 faster). Each pass has a new sentence
    length, as token-bucketed batches do (oneDNN compiles kernels per shape, and bf16's cost more),
    `tokens` a side; the first pass is not timed; fp32 through `matmul`, the backend an fp32 run
    would use. Torch's RNG is left as it was: training's seed decides the weights, not this measurement.
    """
    from mtkit.model.transformer import Transformer

    seconds = {}
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = apply(Transformer(cfg).train(), Runtime(matmul=matmul))
        for name in ("fp32", "bf16"):
            seconds[name] = 0.0
            for i, length in enumerate((29, 31, 33, 35)):
                src = torch.randint(4, cfg.vocab_size, (max(1, tokens // length), length))
                tgt = torch.randint(4, cfg.target_vocab_size, src.shape)
                start = time.perf_counter()
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=name == "bf16"):
                    logits = model(src, tgt)
                loss(logits, tgt).backward()  # type: ignore[no-untyped-call]
                model.zero_grad(set_to_none=True)
                seconds[name] += (time.perf_counter() - start) if i else 0.0
    return seconds["fp32"] / seconds["bf16"]


def resolve_precision(
    precision: str,
    device: torch.device,
    d_model: int = 512,
    model: ModelConfig | None = None,
    loss: Loss = smoothed_cross_entropy,
    matmul: str = "default",
) -> tuple[str, str]:
    """The one rule for training and translation: (fp32 | bf16 | fp16, why), "auto" resolved for this device.

    auto = bf16 on a CUDA GPU that supports it; on a CPU, bf16 only when the CPU has native bf16
    instructions (AVX512-BF16 or AMX; without them bf16 is emulated and ~20x slower) AND bf16
    measures faster: a training pass of `model` (with `loss`, fp32 through `matmul`) when given
    (training; by MIN_PASS_SPEEDUP), else a matrix product of width d_model (translation; by
    MIN_PRODUCT_SPEEDUP); fp32 everywhere else.
    """
    check_precision(precision, PRECISION_CHOICES)
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
    capability = torch.backends.cpu.get_cpu_capability()
    if not cpu_has_native_bf16():
        return "fp32", f"this CPU ({capability}) has no AVX512-BF16 or AMX instructions"
    speedup = bf16_matmul_speedup(d_model) if model is None else bf16_update_speedup(model, loss, matmul)
    what = "a matrix product" if model is None else "a training pass"
    if speedup < (MIN_PRODUCT_SPEEDUP if model is None else MIN_PASS_SPEEDUP):
        return "fp32", f"this CPU ({capability}) has native bf16, but {what} measured only {speedup:.2f}x fp32 in bf16"
    return "bf16", f"this CPU ({capability}) has native bf16 and {what} measured {speedup:.2f}x fp32 in bf16"


def check_trainable(precision: str, device: torch.device) -> None:
    """Refuse to train in a precision this device runs far slower or not at all."""
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise MtkitError(f"{torch.cuda.get_device_name(device)} has no bf16 support; use --precision fp16 or fp32.")
    if precision == "bf16" and device.type == "cpu" and not cpu_has_native_bf16():
        # Measured on an AVX2-only EPYC: `small` took 44 s per update in bf16 against 2 s in fp32.
        raise MtkitError(
            "--precision bf16 is about 20x slower than fp32 on this CPU (it has no AVX512-BF16 or "
            "AMX instructions); use --precision fp32."
        )


def resolve_decoding_precision(precision: str, device: torch.device) -> tuple[str, str]:
    """(fp32 | bf16 | fp16 | int8, why) for translation: training's rule (`resolve_precision`), plus int8 on the CPU."""
    check_precision(precision)
    if precision == "int8":
        if device.type != "cpu":
            raise MtkitError("precision int8 runs on the CPU only; use --device cpu, or fp16/bf16 on a GPU.")
        refusal = int8_available()
        if refusal:
            raise MtkitError(refusal)
        return "int8", "asked for"
    name, reason = resolve_precision(precision, device)
    if precision == "auto":
        logger.info("precision auto -> %s: %s", name, reason)
    return name, reason


def check_decoding_precision(precision: str, device: torch.device) -> None:
    """What `resolve_decoding_precision` refuses, said before a model is read: "auto" is neither measured nor
    resolved here (the model's opening decides it, once: mtkit/decode/loading.py)."""
    check_precision(precision)
    if precision != "auto":
        resolve_decoding_precision(precision, device)  # an asked-for precision is checked, never measured


def resolve_dtype(precision: str, device: torch.device) -> torch.dtype:
    """The dtype a translation model runs in (`resolve_decoding_precision`); int8 runs fp32 around its int8 layers."""
    return torch_dtype(resolve_decoding_precision(precision, device)[0])
