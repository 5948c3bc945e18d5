"""Dropout (section 5.4) with a cheaper random mask on the CPU.

Not in the paper: an engineering choice of kernel. PyTorch's CPU dropout draws its mask with
`bernoulli_`, a double-precision draw per element, a noticeable share of a CPU training update once
the matrix products ran through oneDNN. Here each element gets one 31-bit integer draw compared against
p * 2^31 (the same keep probability, to within 2^-31), and the mask is applied, forward and backward, by
PyTorch's own one-pass dropout-backward kernel, which measured faster (docs/benchmarks.md, "Figures behind the code's
choices": this module). Other devices keep `F.dropout`, fused there, and so does a
step that torch.compile traces (mtkit/train/compile.py): `random_` has no traced form, and inductor fuses
F.dropout's mask into the kernels around it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

RANDOM_BITS = 31  # random_() on int32 draws uniformly from [0, 2^31)


class _CpuDropout(torch.autograd.Function):
    """y = x * keep / (1 - p) with keep ~ Bernoulli(1 - p) per element; dy/dx = keep / (1 - p)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, p: float) -> Tensor:
        keep = keep_mask(x.shape, p, x.device)
        ctx.save_for_backward(keep)
        ctx.scale = 1.0 / (1.0 - p)
        out: Tensor = torch.ops.aten.native_dropout_backward(x, keep, ctx.scale)  # x * keep * scale, one pass
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        (keep,) = ctx.saved_tensors
        dx: Tensor = torch.ops.aten.native_dropout_backward(grad, keep, ctx.scale)
        return dx, None


def keep_mask(shape: torch.Size, p: float, device: torch.device) -> Tensor:
    """A bool mask, True with probability 1 - p (to within 2^-31) independently per element, from torch's RNG."""
    draws = torch.empty(shape, dtype=torch.int32, device=device).random_()  # uniform on [0, 2^31)
    keep: Tensor = draws >= round(p * 2**RANDOM_BITS)
    return keep


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """F.dropout, with the cheaper mask for CPU training in fp32 or bf16 (the module docstring says why)."""
    if not training or p == 0.0:
        return x
    if torch.compiler.is_compiling():  # traced: inductor fuses F.dropout's mask (random_ would break the graph)
        return F.dropout(x, p, training)
    if x.device.type == "cpu" and x.dtype in (torch.float32, torch.bfloat16) and 0.0 < p < 1.0:
        out: Tensor = _CpuDropout.apply(x, p)  # type: ignore[no-untyped-call]
        return out
    return F.dropout(x, p, training)
