"""The precision rule, one for training and translation: "auto" resolved for a device, explicit choices checked.

Not in the paper (it trained in fp32 on P100s). Mixed precision follows PyTorch's AMP recipes
(mtkit/train/precision.py applies it); this module says which precision a run computes in, from the device's bf16
instructions and measurements of bf16 against fp32 (mtkit/runtime/bf16.py). A default only where measured: auto is
bf16 only where a measurement on this device finds it faster, fp32 everywhere else.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable

import torch

from mtkit.config import ModelConfig
from mtkit.errors import MtkitError
from mtkit.precision import PRECISION_CHOICES, check_precision, torch_dtype
from mtkit.runtime.bf16 import (
    CPU_TOKENS,
    GPU_TOKENS,
    Loss,
    bf16_instructions,
    bf16_matmul_speedup,
    bf16_update_speedup,
    smoothed_cross_entropy,
)
from mtkit.runtime.int8 import int8_available
from mtkit.runtime.kept import remembered

logger = logging.getLogger(__name__)

# A whole search measured slower in bf16 than in fp32 on a GPU although a product of its width measured faster
# (docs/benchmarks.md, "Figures behind the code's choices": this module).
GPU_DECODING_WHY = (
    "translation on a GPU measured slower in bf16 than in fp32 (NVIDIA H200: 0.57-0.86x, launch-bound); "
    "--precision bf16 asks for it"
)

# How much faster bf16 must measure for auto to take it. A training pass leaves out what costs the same
# in both (the optimizer step, the data) and meets fewer shapes than a run, so it overstates bf16's gain a little
# (the same row).
MIN_PRODUCT_SPEEDUP, MIN_PASS_SPEEDUP = 1.1, 1.2
# A measurement within this factor of the bar is taken again; where the two fall on both sides of the bar, the
# device's capability decides (bf16: it has the instructions): a measurement under load once chose otherwise than a
# quiet one (the same row).
NEAR = 1.25
AUTO_ENV = "MTKIT_AUTO_PRECISION"  # pins what "auto" resolves to (the tests set fp32, for the same results anywhere)


def cpu_has_native_bf16() -> bool:
    """Whether this CPU has bf16 instructions (AVX512-BF16 or AMX): the only CPUs where bf16 autocast helps."""
    return bf16_instructions() is not None


def measured_choice(measure: Callable[[int], float], bar: float, what: str, native: str) -> tuple[str, str]:
    """(bf16 | fp32, why) by `measure(attempt)`, fp32 time / bf16 time: bf16 at `bar` or above. A first ratio
    within NEAR of the bar is measured again; two that fall on both sides of it leave the choice to the
    capability (`native`: the device has bf16 instructions, so bf16). `what` names what was timed."""
    ratios = [measure(0)]
    if bar / NEAR <= ratios[0] < bar * NEAR:
        logger.info("measuring again: %.2fx is near the %sx bar", ratios[0], bar)
        ratios.append(measure(1))
    said = ", then ".join(f"{r:.2f}x" for r in ratios)
    faster = [r >= bar for r in ratios]
    if all(faster):
        return "bf16", f"{native} and {what} measured {said} fp32 in bf16"
    if not any(faster):
        return "fp32", f"{native}, but {what} measured only {said} fp32 in bf16"
    disagree = f"on both sides of the {bar}x bar, so the capability decides"
    return "bf16", f"{native}; {what} measured {said} fp32 in bf16, {disagree}"


def resolve_precision(
    precision: str,
    device: torch.device,
    d_model: int = 512,
    model: ModelConfig | None = None,
    loss: Loss = smoothed_cross_entropy,
    matmul: str = "default",
    tokens: int | None = None,
) -> tuple[str, str]:
    """The one rule for training and translation: (fp32 | bf16 | fp16, why), "auto" resolved for this device.

    auto = bf16 only where the device has bf16 instructions (a CUDA GPU that supports bf16; a CPU with
    AVX512-BF16 or AMX: without them bf16 is emulated, and slower) AND bf16 measures faster there: a training
    pass of `model` (with `loss`, fp32 through `matmul`; on a GPU of `tokens` a side, the run's batch where
    known, else GPU_TOKENS; on a CPU of CPU_TOKENS) when given (training; by MIN_PASS_SPEEDUP), else a matrix
    product of width d_model (translation on a CPU; by MIN_PRODUCT_SPEEDUP), measured again near the bar
    (`measured_choice`), the answer kept for this machine (mtkit/runtime/kept.py); fp32 everywhere else,
    translation on a GPU included (a whole search measured slower in bf16 there: GPU_DECODING_WHY).
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
        gpu = f"this GPU ({torch.cuda.get_device_name(device)})"
        if not torch.cuda.is_bf16_supported():
            return "fp32", f"{gpu} has no bf16"
        if model is None:  # translation: a product's speed-up does not carry over to a whole search there
            return "fp32", GPU_DECODING_WHY
        native, tokens = f"{gpu} has native bf16", tokens or GPU_TOKENS
    elif device.type == "cpu":
        instructions = bf16_instructions()
        if instructions is None:
            return "fp32", (
                f"bf16 is emulated on this CPU ({torch.backends.cpu.get_cpu_capability()}: no AVX512-BF16 or AMX "
                "instructions)"
            )
        native, tokens = f"this CPU has native bf16 ({instructions})", CPU_TOKENS  # minutes matter there
    else:
        return "fp32", f"auto picks fp32 on {device.type}"
    if model is None:
        product = f"a matrix product of width {d_model}"
        settings: dict[str, object] = {"d_model": d_model, "bar": MIN_PRODUCT_SPEEDUP}

        def choose() -> tuple[str, str]:
            return measured_choice(
                lambda i: bf16_matmul_speedup(d_model, device, i), MIN_PRODUCT_SPEEDUP, product, native
            )

    else:
        settings = {"model": dataclasses.asdict(model), "loss": name_of(loss), "matmul": matmul, "tokens": tokens}
        settings["bar"] = MIN_PASS_SPEEDUP

        def choose() -> tuple[str, str]:
            return measured_choice(
                lambda attempt: bf16_update_speedup(model, loss, matmul, tokens, device, attempt),
                MIN_PASS_SPEEDUP,
                f"a training pass of {tokens:,} tokens",
                native,
            )

    kept = remembered("precision auto: bf16 or fp32", settings, device, lambda: list(choose()))
    name, why = kept.value
    return str(name), f"{why} ({kept.note()})"


def name_of(function: Callable[..., object]) -> str:
    """A function's name as a kept measurement's setting: the same in every process."""
    return f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', type(function).__name__)}"


def check_trainable(precision: str, device: torch.device) -> None:
    """Refuse to train in a precision this device runs far slower or not at all."""
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise MtkitError(f"{torch.cuda.get_device_name(device)} has no bf16 support; use --precision fp16 or fp32.")
    if precision == "bf16" and device.type == "cpu" and not cpu_has_native_bf16():
        # Emulated bf16 measured several times slower than fp32 (the same row); the message says how much.
        raise MtkitError(
            "--precision bf16 is 3-20x slower than fp32 on this CPU (bf16 is emulated: it has no AVX512-BF16 or "
            "AMX instructions); use --precision fp32."
        )


def resolve_decoding_precision(precision: str, device: torch.device) -> tuple[str, str]:
    """(fp32 | bf16 | fp16 | int8, why) for translation: training's rule (`resolve_precision`, whose auto is fp32
    for translation on a GPU), plus int8 on the CPU."""
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
