"""Which kernel runs the fp32 CPU matrix products: PyTorch's default (MKL on x86) or oneDNN, by measuring both.

Not in the paper: an engineering choice of kernel. PyTorch's CPU wheels send an fp32
`F.linear` to MKL's sgemm, and MKL picks its code by the CPU's vendor: on an AMD EPYC with
AVX-512 it runs its generic AVX2 kernels. oneDNN, shipped in the same wheel (it runs PyTorch's
bf16 products already), uses AVX-512 there and measured faster at the model's shapes (docs/benchmarks.md, "Figures
behind the code's choices": this
module); CTranslate2 makes the same choice (oneDNN on non-Intel CPUs). Where MKL runs its best code (Intel CPUs) the two
may be close, so the backend is chosen
by measuring both on the model's width (`resolve_backend`), and the choice is logged with its
reason. The op is internal to PyTorch, so it is also checked against `F.linear` first
(`onednn_works`), and any failure there keeps PyTorch's default. The measurement is taken once per machine and
kept (mtkit/runtime/kept.py): the two backends round differently, so a choice that followed the load of the
moment would make the same training command give different weights.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from mtkit.errors import MtkitError
from mtkit.kernels.linear import onednn_linear, onednn_linear_autograd
from mtkit.runtime.kept import remembered

logger = logging.getLogger(__name__)

BACKENDS = ("default", "onednn")  # default: whatever F.linear does (MKL on x86 CPUs); onednn: see the module docstring
BACKEND_ENV = "MTKIT_CPU_MATMUL"  # pins it: default | onednn | auto (read when a decision is made, never after)
MIN_SPEEDUP = 1.1  # oneDNN must measure at least this much faster to be chosen for all products


class Backend(NamedTuple):
    """The fp32 CPU products' kernel, why, and whether it was measured (then weights may still gain from packing)."""

    name: str
    why: str
    measured: bool = False


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
            y2 = onednn_linear_autograd(x2, w2, b2)
            for y in (y1, y2):
                (y * y).sum().backward()  # type: ignore[no-untyped-call]
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


def resolve_backend(device: torch.device, d_model: int = 512, training: bool = True) -> Backend:
    """The backend for fp32 CPU products, and why: oneDNN where it works and measures >= MIN_SPEEDUP faster.

    MTKIT_CPU_MATMUL=default|onednn pins it (auto, or unset, measures, or reads this machine's kept measurement:
    mtkit/runtime/kept.py). Devices other than the
    CPU always keep the default: their fp32 products do not go through MKL.
    """
    if device.type != "cpu":
        return Backend("default", f"{device.type} products are PyTorch's own")
    pinned = os.environ.get(BACKEND_ENV, "auto")
    if pinned not in (*BACKENDS, "auto"):
        raise MtkitError(f"{BACKEND_ENV}={pinned!r}; choose one of: auto, {', '.join(BACKENDS)}.")
    if pinned == "default":
        return Backend("default", f"{BACKEND_ENV}=default")
    if not onednn_works():
        return Backend("default", "this PyTorch build has no working oneDNN linear op")
    if pinned == "onednn":
        return Backend("onednn", f"{BACKEND_ENV}=onednn")

    def measure() -> float:
        logger.info("measuring oneDNN against PyTorch's default fp32 products on this CPU, a few seconds")
        return onednn_speedup(d_model, training)

    kept = remembered("fp32 matmul: default / oneDNN time", {"d_model": d_model, "training": training}, device, measure)
    speedup = float(kept.value)
    if speedup < MIN_SPEEDUP:
        return Backend(
            "default", f"oneDNN measured only {speedup:.2f}x the default fp32 products here ({kept.note()})", True
        )
    return Backend("onednn", f"oneDNN measured {speedup:.2f}x the default fp32 products here ({kept.note()})", True)
