"""x W^T + b through oneDNN for fp32 on the CPU, with autograd, and from a weight packed once into oneDNN's layout.

Not in the paper: an engineering choice of kernel, made per layer by mtkit.runtime (which measures whether
oneDNN beats PyTorch's default, MKL, on this CPU) and passed here as `onednn` and `packed`.

oneDNN's fp32 product is reached through `torch.ops.mkldnn._linear_pointwise`, the op that PyTorch's own
compiler (inductor) emits for CPU linear layers. It has no autograd formula, so training runs it inside
`_OneDNNLinear`, whose backward is two more oneDNN products. The op is internal to PyTorch: mtkit.runtime
checks it against `F.linear` (`onednn_works`) before choosing it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor


def onednn_linear(x: Tensor, weight: Tensor, bias: Tensor | None, relu: bool = False) -> Tensor:
    """x W^T + b through oneDNN: x (..., in), weight (out, in), both fp32 on the CPU, any strides.

    `relu`: max(0, x W^T + b), the ReLU applied by the product as it writes its output (a oneDNN post-op).
    """
    out: Tensor = torch.ops.mkldnn._linear_pointwise(x, weight, bias, "relu" if relu else "none", [], "")
    return out


class _OneDNNLinear(torch.autograd.Function):
    """y = x W^T + b, with dx = dy W and dW = dy^T x as oneDNN products too (db = the sum of dy over rows)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return onednn_linear(x, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        x, weight = ctx.saved_tensors
        grad_2d = grad.reshape(-1, grad.size(-1))  # (M, out)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = onednn_linear(grad, weight.t(), None)  # (..., in): weight.t() is (in, out), read in place
        if ctx.needs_input_grad[1]:
            # dW = dy^T x. oneDNN copies its first operand into row-major order (the second it reads as it
            # is), so the narrower of dy and x goes first: for the output layer that copies x (M x d_model),
            # not dy (M x vocabulary), which cost 15% of a `small` update (x^T dy is dW^T, returned as a view).
            x_2d = x.reshape(-1, x.size(-1))  # (M, in)
            if grad_2d.size(1) <= x_2d.size(1):
                dw = onednn_linear(grad_2d.t(), x_2d.t(), None)  # (out, M) x (M, in) -> (out, in)
            else:
                dw = onednn_linear(x_2d.t(), grad_2d.t(), None).t()  # (in, M) x (M, out) -> (in, out), transposed
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = grad_2d.sum(0)
        return dx, dw, db


def onednn_linear_autograd(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """`onednn_linear` with gradients for x, weight and bias (`_OneDNNLinear`)."""
    out: Tensor = _OneDNNLinear.apply(x, weight, bias)  # type: ignore[no-untyped-call]
    return out


class PackedWeight:
    """A weight reordered once into oneDNN's blocked layout, for products that only read it (inference).

    Given a plain weight, oneDNN reorders it inside every product; when a late decoding step has
    few rows left that costs more than the product itself (docs/benchmarks.md, "Figures behind the code's choices": this
    module).
    It is valid while its weight is unchanged: an in-place update (an optimizer step) bumps the
    weight's version and a new tensor (`model.to`) has a new address; either way `linear` goes
    back to the plain weight, so a stale copy is never read.
    """

    def __init__(self, weight: Tensor, min_rows: int = 1):
        self.version, self.address = weight._version, weight.data_ptr()
        self.min_rows = min_rows  # read for products of this many rows or more (fewer: MKL's, measured faster)
        self.tensor: Tensor = torch.ops.mkldnn._reorder_linear_weight(weight.detach())

    def valid_for(self, weight: Tensor) -> bool:
        return weight._version == self.version and weight.data_ptr() == self.address


def linear(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    onednn: bool = False,
    packed: PackedWeight | None = None,
    relu: bool = False,
) -> Tensor:
    """F.linear, or oneDNN's product where `onednn` says so or `packed` is given, for fp32 on the CPU.

    Autocast (bf16 training) and every other dtype or device keep F.linear: autocast already
    sends bf16 products to oneDNN. `packed`: `weight` in oneDNN's layout (see PackedWeight),
    read through oneDNN whatever `onednn` says when no gradient is wanted and it is still valid (for a product of
    fewer rows than `packed.min_rows` MKL's, which measured faster there).
    `relu`: max(0, x W^T + b), fused into oneDNN's product when no gradient is wanted (a decoding
    step's feed-forward layers: one pass less over their largest activations), a separate F.relu
    otherwise.
    """
    cpu_fp32 = x.device.type == "cpu" and x.dtype == weight.dtype == torch.float32
    # Traced by torch.compile or torch.export: F.linear, which inductor lowers itself (oneDNN's op it lowers only for
    # frozen weights), and no branch on the rows, which would fix a dynamic dimension.
    tracing = torch.compiler.is_compiling() or torch.compiler.is_exporting()
    if cpu_fp32 and not tracing and not torch.is_autocast_enabled("cpu"):
        learning = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, weight, bias))
        if (
            not learning
            and packed is not None
            and packed.valid_for(weight)
            and x.numel() >= packed.min_rows * x.size(-1)
        ):
            return onednn_linear(x, packed.tensor, bias, relu)
        if onednn:
            if learning:
                out = onednn_linear_autograd(x, weight, bias)
                return F.relu(out) if relu else out
            return onednn_linear(x, weight, bias, relu)
    out = F.linear(x, weight, bias)
    return F.relu(out) if relu else out
