"""Precision, one word for training and decoding: what a model computes in, its names and its one dtype map.

Which precision a run takes ("auto" resolved for a device) is mtkit/runtime/precision.py's rule; training
applies it with autocast (mtkit/train/precision.py), decoding by the dtype the models are cast to
(mtkit/decode/loading.py) or CTranslate2's compute type (mtkit/decode/ct2.py). All of them take their
names from here. torch is imported only by `torch_dtype`, so that commands that never run a model need none.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Literal

from mtkit.errors import MtkitError

if TYPE_CHECKING:
    import torch

Precision = Literal["auto", "fp32", "bf16", "fp16", "int8"]
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # the one dtype map, by torch's names
PRECISION_CHOICES: tuple[str, ...] = ("auto", *DTYPES)  # training's: bf16 and fp16 autocast around fp32 weights
# decoding's: int8 too, dynamic quantization of the Linear layers around fp32 (CPU)
DECODE_PRECISION_CHOICES: tuple[str, ...] = typing.get_args(Precision)
RESOLVED: tuple[str, ...] = tuple(p for p in DECODE_PRECISION_CHOICES if p != "auto")  # what a decision names
# The rule of "auto" (mtkit/runtime/precision.py), in one sentence: the same words in --help and in the docs
# (docs/training.md, docs/gpus.md, docs/faq.md; a test checks them).
AUTO_RULE = (
    "auto takes bf16 only where the device has bf16 instructions (a CUDA GPU with bf16, a CPU with AVX512-BF16 "
    "or AMX) and a measurement at the start finds bf16 faster than fp32 there (a training pass for train, a "
    "matrix product for translate on a CPU), and fp32 everywhere else, translation on a GPU included (measured "
    "slower in bf16 there)."
)


def check_precision(precision: str, choices: tuple[str, ...] = DECODE_PRECISION_CHOICES) -> None:
    """The one check of a precision's name, against the choices of its use (training's, decoding's, resolved)."""
    if precision not in choices:
        raise MtkitError(f"unknown precision {precision!r}; choose one of: {', '.join(choices)}.")


def torch_dtype(precision: str) -> torch.dtype:
    """The dtype of a model's weights and activations in `precision` (int8 runs fp32 around its int8 layers)."""
    import torch  # here: mtkit.precision is read by commands that never import torch

    return typing.cast("torch.dtype", getattr(torch, DTYPES.get(precision, "float32")))
