"""int8 decoding: every Linear layer quantized (the tied output projection too), output close to fp32."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mtkit.config import BOS
from mtkit.decode.loading import load_translator
from mtkit.errors import MtkitError
from mtkit.runtime import int8, quantize_int8, resolve_dtype


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
    int8 = load_translator(model_file, device="cpu", precision="int8")
    assert not any(type(m) is nn.Linear for m in int8.engine.model.modules())
    assert len(int8.translate(["A man rides a bike.", "Two dogs play in the snow."], beam=2, max_len_b=5)) == 2
    assert resolve_dtype("int8", torch.device("cpu")) == torch.float32
    with pytest.raises(MtkitError, match="CPU only"):
        resolve_dtype("int8", torch.device("cuda"))


def test_the_int8_path_still_has_the_api_it_is_built_on():
    """int8 decoding runs through torch.ao.quantization.quantize_dynamic (mtkit/runtime/int8.py), which PyTorch
    deprecated and announced it will remove. The day it is gone this fails, saying what to do."""
    assert hasattr(getattr(torch.ao, "quantization", None), "quantize_dynamic"), (
        f"torch {torch.__version__} has no torch.ao.quantization.quantize_dynamic: move quantize_int8 in "
        f"mtkit/runtime/int8.py to torchao (Int8DynamicActivationInt8WeightConfig, per-channel weights), "
        f"measure it against fp32 with bench/translate_speed.py, and update TESTED_TORCH (now {int8.TESTED_TORCH})."
    )
    assert int8.int8_available() is None


def test_int8_is_refused_in_one_sentence_where_the_api_is_gone(monkeypatch):
    monkeypatch.delattr(torch.ao.quantization, "quantize_dynamic")
    with pytest.raises(MtkitError, match="no longer has"):
        resolve_dtype("int8", torch.device("cpu"))


def test_mtkits_int8_layers_compute_exactly_what_torch_aos_do(make_model):
    """Int8Linear calls the int8 product straight (and fuses the ReLU): the same tensors as torch.ao's layer."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    from mtkit.model.linear import linear_relu

    model = quantize_int8(make_model(50, seed=3))
    layers = [m for m in model.modules() if isinstance(m, DynamicLinear)]
    assert layers and all(type(m) is int8.Int8Linear for m in layers)
    torch.manual_seed(0)
    for layer in (model.decoder[0].ffn.w_1, model.output_proj):
        x = torch.randn(3, 4, layer.in_features)
        want = DynamicLinear.forward(layer, x)  # torch.ao's own forward, on the same packed weight
        assert torch.equal(layer(x), want)
        assert torch.equal(linear_relu(layer, x), torch.relu(want))
    one = x[:1, :1]  # one row, as the step of a one-sentence request has
    assert torch.equal(layer(one), DynamicLinear.forward(layer, one))


def test_an_int8_output_layer_runs_in_blocks_whose_logits_fit_int8_block_bytes(make_model, monkeypatch):
    from mtkit.decode import step as step_module
    from mtkit.decode.ensemble import make_step
    from tests.support.models import batch, sources

    src = batch(sources(6, 50, seed=2))
    fp32 = make_step(make_model(50, seed=3), src, 4, 4)
    step = make_step(quantize_int8(make_model(50, seed=3)), src, 4, 4)
    assert [fp32.block_rows(w) for w in (2_000, 8_000, 50_000)] == [step_module.PROJECT_ROWS] * 3
    assert [step.block_rows(w) for w in (2_000, 8_000, 50_000)] == [256, 64, 16]  # 2 MiB of logits, 16 rows at least
    monkeypatch.setattr(step_module, "INT8_BLOCK_BYTES", 16 * 4 * 50)  # 16 rows of 50 columns
    seen, project = [], step.project
    monkeypatch.setattr(step, "project", lambda states: seen.append(states.size(0)) or project(states))
    with torch.inference_mode():
        lprobs = step.log_probs(torch.full((24,), BOS))
    assert seen == [16, 8]  # 6 sentences x 4 beams
    assert torch.allclose(lprobs.exp().sum(-1), torch.ones(24), atol=1e-5)
