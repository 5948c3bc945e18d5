"""What a process computes with, as one value (`Runtime`), and how it is applied to a model (`apply`).

An entry point (Trainer, the decoding loader) decides once (mtkit/runtime/decide.py) and applies the value to
the models it owns: each Linear layer gets its kernel choice and, for inference, its packed weight as
attributes, the way nanoGPT's attention gets `self.flash`. Nothing is process-global: two models in one
process may compute differently, and a model handed to someone else (a validation translator) keeps what
was applied to it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from mtkit.errors import MtkitError
from mtkit.model.linear import Linear
from mtkit.model.transformer import FeedForward, Transformer
from mtkit.precision import RESOLVED, check_precision, torch_dtype
from mtkit.runtime.caches import cap_kernel_caches
from mtkit.runtime.int8 import quantize_int8
from mtkit.runtime.matmul import BACKENDS, onednn_works
from mtkit.runtime.packing import PACKING, pack

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Runtime:
    """A process's decisions, each with its reason (training's first log line shows them).

    precision: what the model computes in (fp32 | bf16 | fp16 | int8); in training bf16 and fp16 are
    autocast around fp32 weights. matmul: the fp32 CPU products' kernel (default | onednn). packing: which
    weights get a copy in oneDNN's layout for inference (none | all | measured). kernel_caches: the
    (ideep, oneDNN) kernel-cache capacities of the process, None to leave them.
    """

    precision: str = "fp32"
    why: str = "asked for"
    matmul: str = "default"
    matmul_why: str = "PyTorch's own products"
    packing: str = "none"
    kernel_caches: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        check_precision(self.precision, RESOLVED)
        if self.matmul not in BACKENDS:
            raise MtkitError(f"unknown CPU matmul backend {self.matmul!r}; choose one of: {', '.join(BACKENDS)}.")
        if self.matmul == "onednn" and not onednn_works():
            raise MtkitError("this PyTorch build has no working oneDNN linear op; use the default backend.")
        if self.packing not in PACKING:
            raise MtkitError(f"unknown packing {self.packing!r}; choose one of: {', '.join(PACKING)}.")

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the model's weights and activations (int8 runs fp32 around its int8 layers)."""
        return torch_dtype(self.precision)


def apply(model: Transformer, runtime: Runtime) -> Transformer:
    """Make `model` compute as `runtime` says: int8 layers, or each Linear's kernel and packed weight; returns it.

    Called once per model by the entry point that owns it, after the model is on its device and in its dtype
    (packing reads the weights as they are then: a later change of a weight makes its copy unused, not wrong).
    Also caps this process's kernel caches (a rank that adopted rank 0's decisions has not yet).
    """
    if runtime.kernel_caches is not None:
        cap_kernel_caches(*runtime.kernel_caches)
    if runtime.precision == "int8":
        return quantize_int8(model)
    relu_after = {id(m.w_1) for m in model.modules() if isinstance(m, FeedForward)}  # Eq. (2)'s inner layer
    for module in model.modules():
        if isinstance(module, Linear):
            module.onednn = runtime.matmul == "onednn"
            module.packed = pack(module.weight, runtime.packing, module.bias is not None, id(module) in relu_after)
    return model
