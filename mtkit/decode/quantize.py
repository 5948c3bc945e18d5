"""int8 decoding on the CPU: dynamic quantization of every Linear layer, the output projection included.

Dynamic: weights are stored as int8 with one scale per output row (per channel, as CTranslate2
quantizes), activations are quantized on the fly per batch, and the matrix products run in int8
(fbgemm/oneDNN). The fp32 copies of the quantized weights are dropped, which is most of the model's
memory. With one scale per matrix instead, int8 output moved with any rounding elsewhere: a softmax
change that left every fp32 output the same took the Multi30k recipe's seed-1 model from 37.92 to 37.84
BLEU in int8, 0.31 below fp32's 38.15 (`python bench/translate_speed.py`, 2-core Zen 4 EPYC); per
channel it scores 37.96, and the seed-2 and seed-3 models 0.18 and 0.07 above their fp32 scores, at the
same speed.
"""

from __future__ import annotations

import gc
import warnings

import torch
from torch import nn

from mtkit.errors import MtkitError
from mtkit.model.linear import Linear
from mtkit.model.transformer import Transformer


def quantize_int8(model: Transformer) -> Transformer:
    """The model with int8 Linear layers, in place; the tied output projection gets its own int8 copy.

    The output projection (d_model x vocabulary) is the largest matrix product of a decoder
    step, so it is quantized too: a Linear that shares the embedding matrix stands in for the
    tied F.linear; the embedding lookup keeps the fp32 table.
    """
    if (
        "x86" not in torch.backends.quantized.supported_engines
        and "fbgemm" not in torch.backends.quantized.supported_engines
    ):
        raise MtkitError(
            "precision int8 needs PyTorch's x86/fbgemm quantized engine, which this build lacks; use fp32."
        )
    model = model.float().eval()
    for module in model.modules():
        if type(module) is Linear:  # quantize_dynamic matches the exact class; the fp32 backend plays no part in int8
            module.__class__ = nn.Linear
    if model.output_proj is None:
        table = model.tgt_embed.table.weight
        model.output_proj = nn.Linear(table.size(1), table.size(0), bias=False)
        model.output_proj.weight = table  # shared, not copied; quantization makes the int8 copy
    # torch.ao.quantization is deprecated in PyTorch 2.13 in favour of torchao, which mtkit does not
    # depend on; until it does, the old API is the one in the box, and its warnings say nothing to a user.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.ao.quantization.quantize_dynamic(
            model, {nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=True
        )
    gc.collect()  # the replaced fp32 Linear layers go now, not at some later collection
    return model
