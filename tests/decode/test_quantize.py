"""int8 decoding: every Linear layer quantized (the tied output projection too), output close to fp32."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mtkit.config import BOS
from mtkit.decode.quantize import quantize_int8
from mtkit.decode.translator import Translator, resolve_dtype
from mtkit.errors import MtkitError


def test_int8_quantizes_every_linear_and_stays_close_to_fp32(make_model):
    fp32 = make_model(50, seed=3)
    int8 = quantize_int8(make_model(50, seed=3))
    assert not any(type(m) is nn.Linear for m in int8.modules())
    quantized = [m for m in int8.modules() if hasattr(m, "weight") and callable(m.weight)]
    assert quantized and all(m.weight().qscheme() == torch.per_channel_affine for m in quantized)  # a scale per row
    assert int8.output_proj is not None and int8.src_embed.table is int8.tgt_embed.table
    src, tgt = torch.randint(4, 50, (3, 7)), torch.randint(4, 50, (3, 5))
    tgt[:, 0] = BOS
    with torch.inference_mode():
        want, got = fp32(src, tgt), int8(src, tgt)
    assert not torch.equal(want, got)  # it did quantize
    assert (got - want).abs().max() < 0.1 * want.abs().max()
    assert (got.argmax(-1) == want.argmax(-1)).float().mean() > 0.9


def test_the_translator_decodes_in_int8_on_the_cpu_only(model_file):
    int8 = Translator.load(model_file, device="cpu", precision="int8")
    assert not any(type(m) is nn.Linear for m in int8.model.modules())
    assert len(int8.translate(["A man rides a bike.", "Two dogs play in the snow."], beam=2, max_len_b=5)) == 2
    assert resolve_dtype("int8", torch.device("cpu")) == torch.float32
    with pytest.raises(MtkitError, match="CPU only"):
        resolve_dtype("int8", torch.device("cuda"))
