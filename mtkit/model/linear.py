"""The model's linear maps (x W + b: projections, feed-forward, output layer) and their fp32 CPU backend.

Not in the paper: an engineering choice of kernel. PyTorch's CPU wheels send an fp32
`F.linear` to MKL's sgemm, and MKL picks its code by the CPU's vendor: on an AMD EPYC with
AVX-512 it runs its generic AVX2 kernels. oneDNN, shipped in the same wheel (it runs PyTorch's
bf16 products already), uses AVX-512 there. On a 2-core AMD EPYC (Zen 5) the products of the
model's shapes measured 1.8-2.9x faster forward, 2.0-2.3x for dx and 1.1-2.1x for dW through
oneDNN (`python bench/matmul_speed.py`); CTranslate2 makes the same choice (oneDNN on non-Intel
CPUs). Where MKL runs its best code (Intel CPUs) the two may be close, so the backend is chosen
by measuring both on the model's width (`resolve_backend`), once per process, and the choice is
logged with its reason.

oneDNN's fp32 product is reached through `torch.ops.mkldnn._linear_pointwise`, the op that
PyTorch's own compiler (inductor) emits for CPU linear layers. It has no autograd formula, so
training runs it inside `_OneDNNLinear`, whose backward is two more oneDNN products. Because
the op is internal to PyTorch, `resolve_backend` also checks it against `F.linear` before
using it, and any failure there keeps PyTorch's default.

Decoding can also read a weight that oneDNN reordered once into its own layout (`pack`), which
an MKL product cannot: MKL reorders its operand inside every call. Where the measurement keeps
MKL, each weight of a model being prepared for decoding is still timed both ways at a decoding
step's sizes (`packed_speedup`) and packed where oneDNN with the packed weight wins: on a 2-core
AMD EPYC (Zen 3, AVX2 only), whose MKL products are as fast as oneDNN's on plain weights, the
output layer (256 -> 8,000) of the Multi30k recipe's model measured 1.2-1.5x faster packed and its
256 -> 768 and 256 -> 1,024 layers 1.0-1.16x (oneDNN adds a bias as it writes, MKL in a pass of its
own), the others 0.83-1.08x; the recipe's test set then decoded 1.14x faster (`bench/decode_ab.py`).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtkit.errors import MtkitError

logger = logging.getLogger(__name__)

BACKENDS = ("default", "onednn")  # default: whatever F.linear does (MKL on x86 CPUs); onednn: see the module docstring
BACKEND_ENV = "MTKIT_CPU_MATMUL"  # pins it: default | onednn | auto (tests pin onednn; test_linear covers both)
MIN_SPEEDUP = 1.1  # oneDNN must measure at least this much faster to be chosen for all products
MIN_PACKED_SPEEDUP = 1.05  # and this much, with a packed weight, to be chosen for one weight's (`pack`)
# Rows of the products `packed_speedup` times: a late decoding step's few, and a block of the output layer
# (mtkit/decode/step.py) or a busy step's many.
DECODE_ROWS = (32, 256)

_backend = "default"  # process-wide, as torch.backends' flags are: the kernels are a fact of the machine, not the model
_decision: tuple[str, str] | None = None  # (backend, why) once `use_best_backend` has decided
_measured_mkl = False  # whether `_decision` kept MKL by measuring (not pinned): `pack` then times each weight


def backend() -> str:
    """The fp32 CPU backend `linear` uses now."""
    return _backend


def set_backend(name: str) -> None:
    """Use `name` (one of BACKENDS) for every fp32 CPU product from now on, in this process."""
    global _backend
    if name not in BACKENDS:
        raise MtkitError(f"unknown CPU matmul backend {name!r}; choose one of: {', '.join(BACKENDS)}.")
    if name == "onednn" and not onednn_works():
        raise MtkitError("this PyTorch build has no working oneDNN linear op; use the default backend.")
    _backend = name


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


class PackedWeight:
    """A weight reordered once into oneDNN's blocked layout, for products that only read it (inference).

    Given a plain weight, oneDNN reorders it inside every product; when a late decoding step has
    few rows left that costs more than the product itself (8 rows x 256 -> 8,000: 0.43 ms plain,
    0.18 ms packed on a 2-core Zen 4 EPYC; 64 rows: 2.1 vs 1.3 ms; 2,000 rows: 62 vs 58 ms).
    It is valid while its weight is unchanged: an in-place update (an optimizer step) bumps the
    weight's version and a new tensor (`model.to`) has a new address; either way `linear` goes
    back to the plain weight, so a stale copy is never read.
    """

    def __init__(self, weight: Tensor):
        self.version, self.address = weight._version, weight.data_ptr()
        self.tensor: Tensor = torch.ops.mkldnn._reorder_linear_weight(weight.detach())

    def valid_for(self, weight: Tensor) -> bool:
        return weight._version == self.version and weight.data_ptr() == self.address


def pack(weight: Tensor, bias: bool = False, relu: bool = False) -> PackedWeight | None:
    """`weight` packed for oneDNN where its inference products should read it so; None elsewhere.

    Packed: every fp32 CPU weight where products go through oneDNN, and, where MKL was chosen by
    measurement, each weight that measures faster packed (`packed_speedup`, with a bias where its
    layer adds one and a ReLU where one follows: MKL adds each in a pass of its own, oneDNN as it
    writes). An inference tensor (made under torch.inference_mode) is not packed: it keeps no version
    counter, so a later change to it could not be noticed.
    """
    if weight.device.type != "cpu" or weight.dtype != torch.float32 or weight.is_inference():
        return None
    if _backend == "onednn":
        return PackedWeight(weight)
    if _measured_mkl:
        out_features, in_features = weight.shape
        speedup = packed_speedup(in_features, out_features, bias, relu)
        faster = speedup >= MIN_PACKED_SPEEDUP
        logger.debug("%d -> %d packed for oneDNN: %.2fx MKL, %s", in_features, out_features, speedup, faster)
        return PackedWeight(weight) if faster else None
    return None


@functools.cache
def packed_speedup(
    in_features: int, out_features: int, bias: bool, relu: bool = False, rows: tuple[int, ...] = DECODE_ROWS
) -> float:
    """MKL time / oneDNN time with a packed weight for (r x in_features) -> out_features, summed over r in `rows`;
    with `relu`, each followed by a ReLU (a pass of its own after MKL, fused into oneDNN's product).

    Each product's time is its best of 5; measured once per shape and process.
    """
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(out_features, in_features, generator=generator)
    b = torch.randn(out_features, generator=generator) if bias else None
    packed = torch.ops.mkldnn._reorder_linear_weight(weight)
    total = {"mkl": 0.0, "onednn": 0.0}
    for r in rows:
        x = torch.randn(r, in_features, generator=generator)
        runs = {
            "mkl": functools.partial(linear, x, weight, b, None, relu),  # MKL: no packed copy to read
            "onednn": functools.partial(onednn_linear, x, packed, b, relu),
        }
        for run in runs.values():
            run()  # oneDNN compiles its kernel for the shape on the first call
        best = fastest(runs, 5)
        for name in total:
            total[name] += best[name]
    return total["mkl"] / total["onednn"]


def cap_kernel_caches(ideep: int, onednn: int) -> None:
    """Keep at most `ideep` compiled oneDNN products in PyTorch's ideep LRU cache (LRU_CACHE_CAPACITY) and
    `onednn` in oneDNN's own (ONEDNN_PRIMITIVE_CACHE_CAPACITY), unless the environment already says;
    effective only before the process runs its first oneDNN product.

    Each cached product is compiled for one (rows, in, out) shape, and both caches hold 1,024 by
    default. A decoding step's row count changes whenever sentences finish, and a training batch's
    with its tokens, so the caches fill with shapes seen once: on a Zen 4 EPYC 299 row counts of one
    layer held 165 MB (0.27 MB per shape in each cache; both capped at 64: 26 MB), and `small`'s
    training peak RSS (fp32 through oneDNN) was 2,156-2,220 MB with ideep's LRU at 1,024, 1,568-1,584
    MB at 64, at the same speed.
    """
    for name, capacity in (("LRU_CACHE_CAPACITY", ideep), ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", onednn)):
        os.environ.setdefault(name, str(capacity))


def linear(
    x: Tensor, weight: Tensor, bias: Tensor | None = None, packed: PackedWeight | None = None, relu: bool = False
) -> Tensor:
    """F.linear, or oneDNN's product where that is the chosen backend or `packed` is given, for fp32 on the CPU.

    Autocast (bf16 training) and every other dtype or device keep F.linear: autocast already
    sends bf16 products to oneDNN. `packed`: `weight` in oneDNN's layout (see PackedWeight),
    read through oneDNN whatever the backend when no gradient is wanted and it is still valid.
    `relu`: max(0, x W^T + b), fused into oneDNN's product when no gradient is wanted (a decoding
    step's feed-forward layers: one pass less over their largest activations), a separate F.relu
    otherwise.
    """
    if x.device.type == "cpu" and x.dtype == weight.dtype == torch.float32 and not torch.is_autocast_enabled("cpu"):
        learning = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, weight, bias))
        if not learning and packed is not None and packed.valid_for(weight):
            return onednn_linear(x, packed.tensor, bias, relu)
        if _backend == "onednn":
            if learning:
                out: Tensor = _OneDNNLinear.apply(x, weight, bias)  # type: ignore[no-untyped-call]
                return F.relu(out) if relu else out
            return onednn_linear(x, weight, bias, relu)
    out = F.linear(x, weight, bias)
    return F.relu(out) if relu else out


class Linear(nn.Linear):
    """nn.Linear (same parameters, same state dict) whose product goes through `linear`.

    `packed`: its weight in oneDNN's layout, set by `prepack` for inference (not saved).
    """

    packed: PackedWeight | None = None

    def forward(self, x: Tensor, relu: bool = False) -> Tensor:
        return linear(x, self.weight, self.bias, self.packed, relu)


def linear_relu(layer: nn.Module, x: Tensor) -> Tensor:
    """max(0, layer(x)), Eq. (2)'s inner half: fused as `linear` fuses it where `layer` is a Linear, a
    separate F.relu for other layers (the int8 ones of mtkit/decode/quantize.py)."""
    out: Tensor = layer(x, relu=True) if isinstance(layer, Linear) else F.relu(layer(x))
    return out


@functools.cache
def onednn_works() -> bool:
    """Whether oneDNN's linear op exists in this build and agrees with F.linear, forward and backward."""
    built = torch.backends.mkldnn.is_available()  # type: ignore[no-untyped-call]
    if not built or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return False
    try:
        with torch.inference_mode(False), torch.enable_grad():  # the check runs a backward pass wherever it is called
            generator = torch.Generator().manual_seed(0)
            x, w, b = (torch.randn(*s, generator=generator) for s in ((2, 5, 16), (12, 16), (12,)))
            x1, w1, b1 = (t.clone().requires_grad_() for t in (x, w, b))
            x2, w2, b2 = (t.clone().requires_grad_() for t in (x, w, b))
            y1 = F.linear(x1, w1, b1)
            y2 = _OneDNNLinear.apply(x2, w2, b2)  # type: ignore[no-untyped-call]
            for y in (y1, y2):
                (y * y).sum().backward()
        pairs = ((y1, y2), (x1.grad, x2.grad), (w1.grad, w2.grad), (b1.grad, b2.grad))
        return all(a is not None and c is not None and torch.allclose(a, c, atol=1e-4) for a, c in pairs)
    except Exception:  # an internal op: whatever goes wrong with it, the default backend is the answer
        return False


@functools.cache
def onednn_speedup(d_model: int = 512, training: bool = True) -> float:
    """Default time / oneDNN time over a feed-forward layer's products at the model's width, best of 3 each.

    The products are those of w_1 and w_2 (2048 rows, d_model <-> 4 d_model), with their two
    backward products when `training`.
    """
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2048, d_model, generator=generator)
    w1 = torch.randn(4 * d_model, d_model, generator=generator)
    w2 = torch.randn(d_model, 4 * d_model, generator=generator)
    h = torch.randn(2048, 4 * d_model, generator=generator)

    def products(f: Any) -> None:
        f(x, w1, None)
        f(h, w2, None)
        if training:
            f(h, w1.t(), None)  # dx of w_1
            f(h.t(), x.t(), None)  # dW of w_1

    best = fastest(
        {"default": functools.partial(products, F.linear), "onednn": functools.partial(products, onednn_linear)}, 3
    )
    return best["default"] / best["onednn"]


def fastest(runs: Mapping[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Each run's best time in seconds over `rounds` rounds, the runs taking turns within a round, without autograd."""
    best = dict.fromkeys(runs, float("inf"))
    with torch.no_grad():
        for _ in range(rounds):
            for name, run in runs.items():
                start = time.perf_counter()
                run()
                best[name] = min(best[name], time.perf_counter() - start)
    return best


def resolve_backend(device: torch.device, d_model: int = 512, training: bool = True) -> tuple[str, str]:
    """(backend for fp32 CPU products, why): oneDNN where it works and measures >= MIN_SPEEDUP faster.

    MTKIT_CPU_MATMUL=default|onednn pins it (auto, or unset, measures). Devices other than the
    CPU always keep the default: their fp32 products do not go through MKL.
    """
    if device.type != "cpu":
        return "default", f"{device.type} products are PyTorch's own"
    pinned = os.environ.get(BACKEND_ENV, "auto")
    if pinned not in (*BACKENDS, "auto"):
        raise MtkitError(f"{BACKEND_ENV}={pinned!r}; choose one of: auto, {', '.join(BACKENDS)}.")
    if pinned == "default":
        return "default", f"{BACKEND_ENV}=default"
    if not onednn_works():
        return "default", "this PyTorch build has no working oneDNN linear op"
    if pinned == "onednn":
        return "onednn", f"{BACKEND_ENV}=onednn"
    speedup = onednn_speedup(d_model, training)
    if speedup < MIN_SPEEDUP:
        return "default", f"oneDNN measured only {speedup:.2f}x the default fp32 products here"
    return "onednn", f"oneDNN measured {speedup:.2f}x the default fp32 products here"


def use_best_backend(device: torch.device, d_model: int = 512, training: bool = True) -> tuple[str, str]:
    """Resolve the backend (see `resolve_backend`) once per process, switch to it, and return (name, why).

    The first call decides: a trainer's validation builds translators, and they must not switch
    the products of the training they serve (nor measure again).
    """
    global _decision, _measured_mkl
    if _decision is None:
        _decision = resolve_backend(device, d_model, training)
        logger.debug("fp32 CPU products: %s (%s)", *_decision)
        # MKL kept by measuring plain products: `pack` measures again, weight by weight, against packed ones.
        measured = device.type == "cpu" and os.environ.get(BACKEND_ENV, "auto") == "auto" and onednn_works()
        _measured_mkl = measured and _decision[0] == "default"
    set_backend(_decision[0])
    return _decision


def adopt(decision: tuple[str, str]) -> None:
    """Make `decision` (backend, why), another process's (rank 0's under torchrun), this process's own.

    Ranks that measured for themselves could choose differently on a borderline measurement, and
    the ranks of one run on one machine would time each other's work instead of their own.
    """
    global _decision
    set_backend(decision[0])
    _decision = decision


def reset() -> None:
    """Back to the default backend with nothing decided (for tests that need a fresh process's state)."""
    global _decision, _measured_mkl
    _decision, _measured_mkl = None, False
    set_backend("default")
