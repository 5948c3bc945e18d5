"""Decisions about how a process computes, each a value made once by an entry point and applied once to a model.

Precision (training's and translation's one rule), the fp32 CPU matrix products' backend, which weights are
packed for oneDNN, the kernel-cache caps, and int8 quantization. Only entry points decide (`Trainer`,
the decoding loader, and through it `mtkit serve`); they hand the `Runtime` value to `apply`, which sets each
layer's kernel choice as an attribute of the layer. No process-global state: measurements are cached as pure
functions of their arguments, and environment pins (MTKIT_CPU_MATMUL, MTKIT_AUTO_PRECISION) are read when a
decision is made.

Where this package sits among mtkit's layers (what it may import): docs/architecture.md, whose table is
generated from pyproject.toml's import-linter contract.
Inside it: decide > precision > bf16 > decision > int8 | packing > matmul > kept > caches.
"""

from __future__ import annotations

from mtkit.runtime.caches import DECODING_KERNEL_CACHES, TRAINING_KERNEL_CACHES, cap_kernel_caches
from mtkit.runtime.decide import decide_decoding, decide_training
from mtkit.runtime.decision import Runtime, apply
from mtkit.runtime.int8 import quantize_int8
from mtkit.runtime.precision import check_decoding_precision, cpu_has_native_bf16, resolve_dtype, resolve_precision

__all__ = [
    "DECODING_KERNEL_CACHES",
    "TRAINING_KERNEL_CACHES",
    "Runtime",
    "apply",
    "cap_kernel_caches",
    "cpu_has_native_bf16",
    "decide_decoding",
    "decide_training",
    "quantize_int8",
    "check_decoding_precision",
    "resolve_dtype",
    "resolve_precision",
]
