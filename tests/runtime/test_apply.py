"""A decision applied to a model: each Linear's kernel and packed weight are attributes of that model alone."""

from __future__ import annotations

import pytest
import torch

import mtkit
from mtkit import runtime
from mtkit.config import BOS, EOS, PAD
from mtkit.kernels import linear as kernels_linear
from mtkit.kernels.linear import PackedWeight
from mtkit.model.linear import Linear
from mtkit.runtime import Runtime, matmul, packing

needs_onednn = pytest.mark.skipif(not matmul.onednn_works(), reason="this PyTorch build has no oneDNN linear op")
ONEDNN = Runtime(matmul="onednn", matmul_why="the test's choice", packing="all") if matmul.onednn_works() else None


def tiny() -> mtkit.Transformer:
    torch.manual_seed(0)
    return mtkit.build_model("tiny", 40)


def linears(model: torch.nn.Module) -> list[Linear]:
    return [m for m in model.modules() if isinstance(m, Linear)]


@needs_onednn
def test_the_transformer_computes_the_same_on_both_backends():
    src = torch.tensor([[5, 6, 7, 8, EOS], [10, 11, EOS, PAD, PAD]])
    tgt = torch.tensor([[BOS, 20, 21, 22], [BOS, 24, PAD, PAD]])
    results = {}
    for backend in ("default", "onednn"):
        model = runtime.apply(tiny(), Runtime(matmul=backend))
        logits = model(src, tgt)
        logits.pow(2).mean().backward()
        with torch.no_grad():
            model.eval()
            cache = model.init_cache(model.encode(src))
            step, _ = model.decode_step(tgt[:, :1], cache)
        results[backend] = (logits.detach(), step, [p.grad for p in model.parameters()])
    (l1, s1, g1), (l2, s2, g2) = results["default"], results["onednn"]
    assert torch.allclose(l1, l2, atol=1e-5) and torch.allclose(s1, s2, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(g1, g2))


@needs_onednn
def test_a_decision_belongs_to_the_model_it_was_applied_to():
    chosen = runtime.apply(tiny(), ONEDNN)
    other = tiny()  # built later in the same process: nothing process-wide was switched
    assert all(m.onednn and m.packed is not None for m in linears(chosen))
    assert not any(m.onednn or m.packed is not None for m in linears(other))
    assert chosen.output_proj in linears(chosen)  # the tied output layer too, with no special case


def test_weights_are_packed_only_where_the_plan_says():
    assert packing.pack(torch.randn(4, 3), "none") is None
    model = runtime.apply(tiny(), Runtime())
    assert all(m.packed is None and not m.onednn for m in linears(model))


@needs_onednn
def test_a_packed_model_decodes_as_before_and_training_ignores_the_packed_copies():
    src = torch.tensor([[5, 6, 7, 8, EOS], [10, 11, EOS, PAD, PAD]])
    tgt = torch.tensor([[BOS, 20, 21, 22], [BOS, 24, PAD, PAD]])
    model = tiny().eval()
    with torch.no_grad():
        before = model(src, tgt)
        runtime.apply(model, ONEDNN)
        assert model.output_proj.packed is not None and model.decoder[0].ffn.w_1.packed is not None
        assert torch.allclose(model(src, tgt), before, atol=1e-5)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(src, tgt).pow(2).mean().backward()  # gradients flow through the plain weights
    assert all(p.grad is not None for p in model.parameters())
    optimizer.step()
    model.eval()
    with torch.no_grad():
        fresh = tiny()
        fresh.load_state_dict(model.state_dict())
        assert torch.allclose(model(src, tgt), fresh.eval()(src, tgt), atol=1e-5)  # the stale copies are not read


@needs_onednn
def test_a_model_made_in_inference_mode_is_left_unpacked_and_still_decodes():
    src = torch.tensor([[5, 6, 7, EOS]])
    tgt = torch.tensor([[BOS, 20, 21]])
    with torch.inference_mode():
        model = runtime.apply(tiny().eval(), ONEDNN)  # inference tensors: no version counter to check a copy by
        assert model.output_proj.packed is None and model.decoder[0].ffn.w_1.packed is None
        assert model(src, tgt).shape == (1, 3, model.cfg.target_vocab_size)


@needs_onednn
def test_where_measurement_keeps_mkl_each_weight_is_packed_only_if_it_measures_faster_packed(monkeypatch):
    monkeypatch.setenv(matmul.BACKEND_ENV, "auto")
    monkeypatch.setattr(matmul, "onednn_speedup", lambda d_model, training: 0.9)  # MKL kept for plain products
    timed = []

    def speedup(in_features, out_features, bias, relu, rows=packing.DECODE_ROWS):
        timed.append((in_features, out_features, bias, relu))
        return 1.3 if out_features == 40 else 1.02  # the output layer (d_model -> tiny()'s 40 words) gains, no other

    monkeypatch.setattr(packing, "packed_speedup", speedup)
    plan = runtime.decide_decoding("fp32", torch.device("cpu"), 32)
    assert (plan.matmul, plan.packing) == ("default", "measured")
    model = runtime.apply(tiny().eval(), plan)
    assert model.output_proj.packed is not None
    assert all(m.packed is None for m in linears(model) if m is not model.output_proj)
    d, d_ff = model.cfg.d_model, model.cfg.d_ff
    assert (d, 40, False, False) in timed and (d, d_ff, True, True) in timed  # the first FFN layer: its ReLU too
    assert {(inputs, out) for inputs, out, _, relu in timed if relu} == {(d, d_ff)}  # and no other layer
    src, tgt = torch.tensor([[5, 6, 7, EOS]]), torch.tensor([[BOS, 20, 21]])
    with torch.no_grad():
        packed = model(src, tgt)
        model.output_proj.packed = None
        assert torch.allclose(packed, model(src, tgt), atol=1e-5)  # the packed product, read through oneDNN


@needs_onednn
def test_a_packed_weight_is_read_for_few_rows_only_from_where_that_measured_faster_packed(monkeypatch):
    speedups = {packing.DECODE_ROWS: 1.3, (1,): 0.6, (4,): 0.8, (8,): 1.1}
    monkeypatch.setattr(packing, "packed_speedup", lambda *shape, rows=packing.DECODE_ROWS: speedups[rows])
    measured = packing.pack(torch.randn(24, 16), "measured")
    assert measured is not None and measured.min_rows == 8
    speedups[(8,)] = 0.9  # another shape, slower packed at every few rows: read from past the last of them
    assert packing.pack(torch.randn(24, 8), "measured").min_rows == packing.FEW_ROWS[-1] + 1
    speedups[(1,)] = 1.2  # faster packed at one row: read for every product
    assert packing.pack(torch.randn(24, 4), "measured").min_rows == 1
    weight = torch.randn(24, 16)
    packed = PackedWeight(weight, min_rows=8)
    read = []
    monkeypatch.setattr(kernels_linear, "onednn_linear", lambda x, *rest: read.append(x.shape) or torch.zeros(1))
    with torch.no_grad():
        one = kernels_linear.linear(torch.randn(1, 1, 16), weight, None, False, packed)
        kernels_linear.linear(torch.randn(7, 16), weight, None, False, packed)
        kernels_linear.linear(torch.randn(2, 4, 16), weight, None, False, packed)
    assert read == [(2, 4, 16)]  # 1 and 7 rows were MKL's, on the plain weight; 8 rows the packed one
    assert one.shape == (1, 1, 24)


@needs_onednn
def test_a_pinned_backend_packs_by_the_pin_and_never_measures(monkeypatch):
    monkeypatch.setattr(packing, "packed_speedup", lambda *shape: pytest.fail("measured"))
    for pin, packed in (("default", False), ("onednn", True)):
        monkeypatch.setenv(matmul.BACKEND_ENV, pin)
        plan = runtime.decide_decoding("fp32", torch.device("cpu"), 32)
        assert (packing.pack(torch.randn(8, 4), plan.packing) is not None) == packed


def test_decoding_in_int8_or_bf16_leaves_the_fp32_backend_unmeasured(monkeypatch):
    monkeypatch.setenv(matmul.BACKEND_ENV, "auto")
    monkeypatch.setattr(matmul, "onednn_speedup", lambda *args: pytest.fail("measured"))
    for precision in ("int8", "bf16"):
        plan = runtime.decide_decoding(precision, torch.device("cpu"), 32)
        assert (plan.matmul, plan.packing) == ("default", "none") and plan.precision == precision


@needs_onednn
def test_the_packed_speedup_is_a_ratio_of_two_timings():
    for relu in (False, True):
        assert 0.0 < packing.packed_speedup(16, 24, True, relu, rows=(2, 8)) < float("inf")
