"""The decisions an entry point makes once for its process: one function for training, one for decoding.

Only entry points call these: `Trainer` (on rank 0 under torchrun, every rank then applying rank 0's value:
ranks timing at once would skew the measurements, and ranks that measured for themselves could choose
differently on a borderline one) and the decoding loader (mtkit/decode/loading.py: `mtkit translate`, `serve`).
"""

from __future__ import annotations

import logging

import torch

from mtkit.config import ModelConfig
from mtkit.errors import MtkitError
from mtkit.runtime.caches import DECODING_KERNEL_CACHES, TRAINING_KERNEL_CACHES, cap_kernel_caches
from mtkit.runtime.decision import Runtime
from mtkit.runtime.matmul import Backend, resolve_backend
from mtkit.runtime.precision import check_trainable, resolve_decoding_precision, resolve_precision

logger = logging.getLogger(__name__)


def decide_training(
    precision: str, device: torch.device, model: ModelConfig, compiled: bool = False, tokens: int | None = None
) -> Runtime:
    """What training `model` on `device` computes in: `precision` (auto resolved, timing a training pass) and the
    fp32 CPU products' backend; nothing packed (the weights change at every update).
    `compiled`: the step is torch.compiled, whose CPU products are PyTorch's default (inductor lowers oneDNN's
    linear only for frozen weights), so the backend is not measured. `tokens`: the run's batch, a side, where
    known: a GPU's measurement times a pass of it (else mtkit.runtime.bf16.GPU_TOKENS; a CPU's is CPU_TOKENS).

    CPU training caps the kernel caches first, before any measurement runs a oneDNN product.
    """
    if precision == "fp16" and device.type == "cpu":
        raise MtkitError(
            "--precision fp16 needs a CUDA device (CPU kernels are not faster in fp16); "
            "use --precision bf16 or fp32 on CPU."
        )
    caches = TRAINING_KERNEL_CACHES if device.type == "cpu" else None
    if caches is not None:
        cap_kernel_caches(*caches)
    # fp32 products (all of fp32 training; under bf16 autocast only what autocast leaves in fp32) through
    # the faster CPU backend. Chosen first, so that auto's measurement times fp32 as an fp32 run computes it.
    if compiled and device.type == "cpu":
        backend = Backend("default", "torch.compile lowers oneDNN's linear only for frozen weights")
    else:
        backend = resolve_backend(device, model.d_model, training=True)
    name, why = resolve_precision(precision, device, model.d_model, model, matmul=backend.name, tokens=tokens)
    check_trainable(name, device)
    runtime = Runtime(name, why, backend.name, backend.why, "none", caches)
    logger.debug("training runtime: %s", runtime)
    return runtime


def decide_decoding(precision: str, device: torch.device, d_model: int = 512) -> Runtime:
    """What translation with a model of width `d_model` on `device` computes in: `precision` (auto and int8
    included), the fp32 CPU products' backend, and which weights are packed for oneDNN (all where products go
    through oneDNN; each that measures faster so where measuring kept the default).

    Caps the kernel caches first, before `precision auto` or the backend's measurement runs a product.
    """
    cap_kernel_caches(*DECODING_KERNEL_CACHES)
    name, why = resolve_decoding_precision(precision, device)
    if name == "int8":
        runtime = Runtime(name, why, "default", "int8 layers run quantized products", "none", DECODING_KERNEL_CACHES)
    elif name != "fp32":
        runtime = Runtime(name, why, "default", f"{name} products are PyTorch's own", "none", DECODING_KERNEL_CACHES)
    else:
        backend = resolve_backend(device, d_model, training=False)
        packing = "all" if backend.name == "onednn" else ("measured" if backend.measured else "none")
        runtime = Runtime(name, why, backend.name, backend.why, packing, DECODING_KERNEL_CACHES)
    logger.debug("decoding runtime: %s", runtime)
    return runtime
