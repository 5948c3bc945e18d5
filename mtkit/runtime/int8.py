"""int8 decoding on the CPU: dynamic quantization of every Linear layer, the tied output layer included.

Dynamic: weights are stored as int8 with one scale per output row (per channel, as CTranslate2
quantizes), activations are quantized on the fly per batch, and the matrix products run in int8
(fbgemm/oneDNN). The fp32 copies of the quantized weights are dropped, which is most of the model's
memory. With one scale per matrix instead, int8 output moved with any rounding elsewhere, and scored below
fp32; per channel it scored as fp32 did, at the same speed (docs/benchmarks.md, "Figures behind the code's choices":
this module).

The products run through `torch.ao.quantization.quantize_dynamic`, which PyTorch deprecated in favour of
torchao. torchao 0.18's equivalent (Int8DynamicActivationInt8WeightConfig: int8 per-token activations,
int8 per-channel weights) ran several times slower than this path without torch.compile, and slower than fp32
(the same row). So this one function is the only place that names
the old API; `TESTED_TORCH` says which versions it is tested on, and tests/decode/test_quantize.py fails
with what to do the day the API is gone.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

from mtkit.errors import MtkitError
from mtkit.model.linear import Linear
from mtkit.model.transformer import Transformer

TESTED_TORCH = ("2.13",)  # torch releases (major.minor) whose torch.ao.quantization.quantize_dynamic mtkit tests


def int8_available() -> str | None:
    """None where int8 decoding can run; else why not, in one sentence."""
    engines = torch.backends.quantized.supported_engines
    if "x86" not in engines and "fbgemm" not in engines:
        return "precision int8 needs PyTorch's x86/fbgemm quantized engine, which this build lacks; use fp32."
    if not hasattr(getattr(torch.ao, "quantization", None), "quantize_dynamic"):
        return (
            f"precision int8 needs torch.ao.quantization.quantize_dynamic, which PyTorch {torch.__version__} "
            f"no longer has (mtkit's int8 is tested on torch {', '.join(TESTED_TORCH)}); use fp32."
        )
    return None


class Int8Linear(DynamicLinear):
    """torch.ao's dynamic int8 Linear (same packed weight, same state dict), its product called straight.

    Why: torch.ao's `forward` reaches the int8 product through torch.ops' overload packet, which checks every
    call's arguments in Python for a script object that may need Python dispatch, then calls `.to` on the
    result; for the one-row products of a one-sentence request that was a third of a product's time (docs/benchmarks.md,
    "Figures behind the code's choices":
    mtkit/runtime/int8.py).
    Here the operator is called as its one overload, and max(0, .) is fused into it (`relu=True`, Eq. (2)'s
    inner half: fbgemm's linear_relu_dynamic, which gives exactly relu(linear_dynamic)). The result is the
    same tensor as torch.ao's (tests/decode/test_quantize.py).
    """

    fuses_relu = True  # mtkit.model.linear.linear_relu hands it relu=True
    quantizes_each_call = True  # activations get one scale per call (mtkit/decode/step.py sizes its blocks by it)

    def forward(self, x: Tensor, relu: bool = False) -> Tensor:
        op = _LINEAR_RELU if relu else _LINEAR
        # torch.ao's layers of version 4 and later quantize activations with reduce_range, as the x86 engine wants.
        y: Tensor = op(x, self._packed_params._packed_params, self.version is not None and self.version >= 4)
        return y if y.dtype == x.dtype else y.to(x.dtype)

    unpacked: Int8Rows | None = None  # the layer's integers, read by the first `rows` and kept (see Int8Rows)

    def rows(self, ids: Tensor, logits_bias: Tensor | None = None) -> Callable[[Tensor], Tensor]:
        """This layer restricted to its output rows `ids` (a lexical shortlist): states (N, in) -> those rows'
        logits (N, len(ids)), the full layer's, plus `logits_bias[ids]` when given (Marian's final_logits_bias).

        It stays int8: the rows' integers with their own scales, repacked (a millisecond or so a batch), so the
        product keeps int8's speed; a dequantized fp32 copy measured slower than the whole int8 layer."""
        if self.unpacked is None:
            self.unpacked = Int8Rows.of(self)
        restricted = self.unpacked.layer(ids)
        if logits_bias is None:
            return restricted
        extra = logits_bias.index_select(0, ids)
        return lambda states: restricted(states) + extra

    def set_weight_bias(self, w: Tensor, b: Tensor | None) -> None:
        """New weights: the unpacked copy `rows` keeps is stale."""
        self.unpacked = None
        super().set_weight_bias(w, b)


@dataclass(frozen=True)
class Int8Rows:
    """An int8 layer unpacked once: its integers (out, in), their scales and zero points (per row, or one for the
    whole matrix: 0-d tensors), and its bias.

    Why kept (on the layer, `Int8Linear.unpacked`): fbgemm holds the layer's weight packed, and unpacking it
    (`layer.weight()`, and `layer.bias()` again) cost milliseconds, paid by every shortlisted batch: a one-sentence
    request of a student took far longer with its shortlist than without (docs/benchmarks.md, "Figures behind the
    code's choices": mtkit/decode/step.py)."""

    ints: Tensor
    scales: Tensor
    zeros: Tensor
    bias: Tensor | None

    @classmethod
    def of(cls, layer: DynamicLinear) -> Int8Rows:
        weight = layer.weight()  # type: ignore[no-untyped-call]
        if weight.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
            scales, zeros = weight.q_per_channel_scales(), weight.q_per_channel_zero_points()
        else:
            scales, zeros = torch.tensor(weight.q_scale()), torch.tensor(weight.q_zero_point())
        return cls(weight.int_repr(), scales, zeros, layer.bias())  # type: ignore[no-untyped-call]

    def layer(self, rows: Tensor) -> Int8Linear:
        """An int8 layer of `rows`: the same integers (requantized from their exact values), repacked for fbgemm."""
        per_row = self.scales.dim() == 1
        scales = self.scales.index_select(0, rows) if per_row else self.scales
        zeros = self.zeros.index_select(0, rows) if per_row else self.zeros
        ints = self.ints.index_select(0, rows).float()
        if per_row:  # the rows' exact values (scales are fp64), in fp32 as quantizing takes them
            values = ((ints - zeros[:, None]) * scales[:, None]).float()
            quantized = torch.quantize_per_channel(values, scales, zeros, 0, torch.qint8)
        else:
            values = ((ints - zeros) * scales).float()
            quantized = torch.quantize_per_tensor(values, float(scales), int(zeros), torch.qint8)
        restricted = Int8Linear(ints.size(1), rows.numel(), bias_=self.bias is not None, dtype=torch.qint8)  # type: ignore[no-untyped-call]
        restricted.set_weight_bias(quantized, None if self.bias is None else self.bias.index_select(0, rows))
        return restricted


_LINEAR = torch.ops.quantized.linear_dynamic.default
_LINEAR_RELU = torch.ops.quantized.linear_relu_dynamic.default


def quantize_int8(model: Transformer) -> Transformer:
    """The model with int8 Linear layers, in place (each layer, the output projection too, gets its int8 copy).

    The output projection (d_model x vocabulary) is the largest matrix product of a decoder step, so
    it is quantized like the others: tied or not, it is a Linear; the embedding lookup keeps the fp32 table.
    """
    refusal = int8_available()
    if refusal:
        raise MtkitError(refusal)
    model = model.float().eval()
    for module in model.modules():
        if isinstance(module, Linear):  # quantize_dynamic matches the exact class; kernels play no part in int8
            module.__class__ = nn.Linear  # type: ignore[assignment]
    # torch.ao.quantization is deprecated in PyTorch 2.13 in favour of torchao (see the module docstring);
    # its warnings say nothing to a user.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.ao.quantization.quantize_dynamic(  # type: ignore[no-untyped-call]
            model, {nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=True
        )
    for module in model.modules():
        if type(module) is DynamicLinear:
            module.__class__ = Int8Linear
    gc.collect()  # the replaced fp32 Linear layers go now, not at some later collection
    return model
