"""Which weights a model being prepared for decoding keeps a copy of in oneDNN's layout (`PackedWeight`).

Decoding can read a weight that oneDNN reordered once into its own layout, which an MKL product
cannot: MKL reorders its operand inside every call. Where products go through oneDNN every weight is
packed. Where measurement kept MKL, each weight is still timed both ways at a decoding step's sizes
(`packed_speedup`) and packed where oneDNN with the packed weight wins: on a CPU whose MKL products are as fast as
oneDNN's on plain weights, the output layer and the layers with a bias gained (oneDNN adds a bias as it writes,
MKL in a pass of its own), the others not (docs/benchmarks.md, "Figures behind the code's choices": this module). Each
shape's measurement is kept per
machine (mtkit/runtime/kept.py), so that the same command packs the same weights whatever the load.
"""

from __future__ import annotations

import functools
import logging

import torch
from torch import Tensor

from mtkit.kernels.linear import PackedWeight, linear, onednn_linear
from mtkit.runtime.kept import remembered
from mtkit.runtime.matmul import fastest

logger = logging.getLogger(__name__)

PACKING = ("none", "all", "measured")  # no weight; every fp32 CPU weight; each weight that measures faster packed
MIN_PACKED_SPEEDUP = 1.05  # how much faster a weight's products must measure packed for it to be packed
# Rows of the products `packed_speedup` times: a late decoding step's few, and a block of the output layer
# (mtkit/decode/step.py) or a busy step's many.
DECODE_ROWS = (32, 256)
# Fewer rows, each timed on its own: a lone sentence's greedy step (1) or beam (4), a late step of a small batch.
# The smallest at which the packed weight measures faster is where `linear` starts reading it
# (`PackedWeight.min_rows`); below it MKL's product on the plain weight is read.
FEW_ROWS = (1, 4, 8)


def pack(weight: Tensor, packing: str, bias: bool = False, relu: bool = False) -> PackedWeight | None:
    """`weight` packed for oneDNN where `packing` (one of PACKING) says its inference products should read it so.

    "measured": packed where it measures faster so (`packed_speedup`, with a bias where its layer adds one
    and a ReLU where one follows: MKL adds each in a pass of its own, oneDNN as it writes), and read for a
    product of few rows only where that measures faster packed too (`PackedWeight.min_rows`). Only fp32 CPU
    weights are packed, and no inference tensor (made under torch.inference_mode): it keeps no version
    counter, so a later change to it could not be noticed.
    """
    if packing == "none" or weight.device.type != "cpu" or weight.dtype != torch.float32 or weight.is_inference():
        return None
    if packing == "all":
        return PackedWeight(weight)
    out_features, in_features = weight.shape
    shape = {"in": in_features, "out": out_features, "bias": bias, "relu": relu, "rows": list(DECODE_ROWS)}
    kept = remembered(
        "packed weight: MKL / oneDNN time",
        shape,
        weight.device,
        lambda: packed_speedup(in_features, out_features, bias, relu),
    )
    speedup = float(kept.value)
    faster = speedup >= MIN_PACKED_SPEEDUP
    logger.debug("%d -> %d packed for oneDNN: %.2fx MKL, %s", in_features, out_features, speedup, faster)
    if not faster:
        return None
    # A lone sentence's step multiplies one row (greedy) or four (a beam), where oneDNN's call can cost more than
    # MKL's product (docs/benchmarks.md, "A static cache and a compiled step"): each of FEW_ROWS timed too, kept apart.
    few = remembered(
        "packed weight at few rows: MKL / oneDNN time, each",
        {**shape, "rows": list(FEW_ROWS)},
        weight.device,
        lambda: [packed_speedup(in_features, out_features, bias, relu, rows=(r,)) for r in FEW_ROWS],
    )
    return PackedWeight(weight, min_rows=min_rows(list(few.value)))


def min_rows(speedups: list[float]) -> int:
    """The fewest rows from which a packed weight is read: the first of FEW_ROWS whose `speedups` (the packed
    weight's, at each) reaches MIN_PACKED_SPEEDUP, else one past the last (it won at DECODE_ROWS, more)."""
    faster = [rows for rows, speedup in zip(FEW_ROWS, speedups) if float(speedup) >= MIN_PACKED_SPEEDUP]
    return faster[0] if faster else FEW_ROWS[-1] + 1


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
            "mkl": functools.partial(linear, x, weight, b, False, None, relu),  # MKL: no packed copy to read
            "onednn": functools.partial(onednn_linear, x, packed, b, relu),
        }
        for run in runs.values():
            run()  # oneDNN compiles its kernel for the shape on the first call
        best = fastest(runs, 5)
        for name in total:
            total[name] += best[name]
    return total["mkl"] / total["onednn"]
