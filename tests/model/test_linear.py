"""The fp32 CPU backend of the linear maps: oneDNN computes what the default does, and the choice follows its rule."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

import mtkit
from mtkit.config import BOS, EOS, PAD
from mtkit.errors import MtkitError
from mtkit.model import linear

needs_onednn = pytest.mark.skipif(not linear.onednn_works(), reason="this PyTorch build has no oneDNN linear op")


@pytest.fixture
def onednn():
    linear.set_backend("onednn")


def grads(backend: str, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None):
    linear.set_backend(backend)
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    b = None if b is None else b.clone().requires_grad_()
    y = linear.linear(x, w, b)
    (y * torch.linspace(-1, 1, y.numel()).view_as(y)).sum().backward()
    return y.detach(), x.grad, w.grad, None if b is None else b.grad


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(7, 16), (3, 5, 16)])
def test_onednn_forward_and_backward_equal_the_default(shape, bias):
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(*shape, generator=g), torch.randn(12, 16, generator=g)
    b = torch.randn(12, generator=g) if bias else None
    for got, want in zip(grads("onednn", x, w, b), grads("default", x, w, b)):
        if want is None:
            assert got is None
        else:
            assert got.shape == want.shape and torch.allclose(got, want, atol=1e-5)


@needs_onednn
def test_onednn_takes_strided_inputs(onednn):
    x = torch.randn(16, 7).t()  # (7, 16), not contiguous
    w = torch.randn(16, 12).t()
    assert torch.allclose(linear.linear(x, w), F.linear(x, w), atol=1e-5)


@needs_onednn
def test_onednn_leaves_other_dtypes_and_autocast_to_pytorch(onednn):
    x, w = torch.randn(4, 8, dtype=torch.float64), torch.randn(3, 8, dtype=torch.float64)
    assert torch.equal(linear.linear(x, w), F.linear(x, w))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert linear.linear(x.float(), w.float()).dtype == torch.bfloat16  # autocast's own bf16 product


def tiny() -> mtkit.Transformer:
    torch.manual_seed(0)
    return mtkit.build_model("tiny", 40)


@needs_onednn
def test_the_transformer_computes_the_same_on_both_backends():
    src = torch.tensor([[5, 6, 7, 8, EOS], [10, 11, EOS, PAD, PAD]])
    tgt = torch.tensor([[BOS, 20, 21, 22], [BOS, 24, PAD, PAD]])
    results = {}
    for backend in ("default", "onednn"):
        linear.set_backend(backend)
        model = tiny()
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


def test_the_state_dict_is_the_same_as_with_torchs_linear_layers():
    model = tiny()
    assert all(type(m) is not torch.nn.Linear for m in model.modules())
    assert isinstance(model.decoder[0].ffn.w_1, torch.nn.Linear)  # a subclass: same parameters, same keys
    assert "decoder.0.ffn.w_1.weight" in model.state_dict()


def test_an_unknown_backend_is_refused_with_the_choices():
    with pytest.raises(MtkitError, match="default, onednn"):
        linear.set_backend("mkl")


@pytest.mark.parametrize("pin, want", [("default", "default"), ("onednn", "onednn")])
def test_the_environment_pins_the_choice(monkeypatch, pin, want):
    monkeypatch.setenv(linear.BACKEND_ENV, pin)
    name, why = linear.resolve_backend(torch.device("cpu"))
    assert name == (want if linear.onednn_works() else "default")
    assert pin in why or "no working oneDNN" in why


def test_a_bad_pin_is_one_clear_error(monkeypatch):
    monkeypatch.setenv(linear.BACKEND_ENV, "fast")
    with pytest.raises(MtkitError, match="MTKIT_CPU_MATMUL='fast'; choose one of: auto, default, onednn"):
        linear.resolve_backend(torch.device("cpu"))


@needs_onednn
def test_auto_picks_onednn_only_when_it_measures_faster(monkeypatch):
    monkeypatch.setenv(linear.BACKEND_ENV, "auto")
    for speedup, want in ((2.3, "onednn"), (1.05, "default")):
        monkeypatch.setattr(linear, "onednn_speedup", lambda d_model, training, s=speedup: s)
        name, why = linear.resolve_backend(torch.device("cpu"))
        assert name == want and f"{speedup:.2f}x" in why


def test_other_devices_keep_the_default():
    assert linear.resolve_backend(torch.device("meta"))[0] == "default"


def test_the_first_decision_holds_for_the_process(monkeypatch):
    monkeypatch.setenv(linear.BACKEND_ENV, "default")
    assert linear.use_best_backend(torch.device("cpu"))[0] == "default"
    monkeypatch.setenv(linear.BACKEND_ENV, "onednn")  # a validation translator built later must not switch it
    assert linear.use_best_backend(torch.device("cpu"), training=False) == ("default", "MTKIT_CPU_MATMUL=default")
    assert linear.backend() == "default"


def test_the_check_works_inside_inference_mode():
    linear.onednn_works.cache_clear()
    try:
        with torch.inference_mode():
            assert linear.onednn_works() == hasattr(torch.ops.mkldnn, "_linear_pointwise")
    finally:
        linear.onednn_works.cache_clear()


@needs_onednn
def test_a_bias_alone_that_learns_gets_its_gradient(onednn):
    x, w = torch.randn(4, 8), torch.randn(3, 8)
    b = torch.zeros(3, requires_grad=True)
    linear.linear(x, w, b).sum().backward()
    assert torch.equal(b.grad, torch.full((3,), 4.0))


@needs_onednn
def test_a_packed_weight_gives_the_same_products_and_is_dropped_once_the_weight_changes(onednn):
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(3, 5, 16, generator=g), torch.randn(12, 16, generator=g), torch.randn(12, generator=g)
    packed = linear.pack(w)
    assert packed is not None and packed.tensor.is_mkldnn
    assert torch.allclose(linear.linear(x, w, b, packed), F.linear(x, w, b), atol=1e-5)
    w.add_(1.0)  # an optimizer step: in place, so the packed copy is stale
    assert not packed.valid_for(w)
    assert torch.allclose(linear.linear(x, w, b, packed), F.linear(x, w, b), atol=1e-5)
    moved = w.clone()  # a new tensor (as model.to makes) with the old version counter's value
    assert not packed.valid_for(moved)


def test_weights_are_packed_only_where_products_go_through_onednn():
    linear.set_backend("default")
    assert linear.pack(torch.randn(4, 3)) is None
    model = tiny()
    model.prepack()
    assert model.output_packed is None
    assert all(m.packed is None for m in model.modules() if isinstance(m, linear.Linear))


@needs_onednn
def test_a_prepacked_model_decodes_as_before_and_training_ignores_the_packed_copies(onednn):
    src = torch.tensor([[5, 6, 7, 8, EOS], [10, 11, EOS, PAD, PAD]])
    tgt = torch.tensor([[BOS, 20, 21, 22], [BOS, 24, PAD, PAD]])
    model = tiny().eval()
    with torch.no_grad():
        before = model(src, tgt)
        model.prepack()
        assert model.output_packed is not None and model.decoder[0].ffn.w_1.packed is not None
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


def test_the_kernel_caches_are_capped_unless_the_environment_says(monkeypatch):
    monkeypatch.delenv("LRU_CACHE_CAPACITY", raising=False)
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "500")
    linear.cap_kernel_caches(64, 16)
    assert os.environ["LRU_CACHE_CAPACITY"] == "64" and os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "500"


@pytest.mark.parametrize("backend", ["default", "onednn"])
def test_the_fused_relu_equals_a_separate_one_with_and_without_gradients(backend):
    if backend == "onednn" and not linear.onednn_works():
        pytest.skip("this PyTorch build has no oneDNN linear op")
    linear.set_backend(backend)
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(3, 5, 16, generator=g), torch.randn(12, 16, generator=g), torch.randn(12, generator=g)
    want = F.relu(F.linear(x, w, b))
    packed = linear.pack(w)
    with torch.no_grad():
        got = linear.linear(x, w, b, packed, relu=True)
    assert torch.allclose(got, want, atol=1e-5) and bool((got == 0).any())  # some outputs were negative
    w.requires_grad_()
    y = linear.linear(x, w, b, relu=True)
    y.sum().backward()
    assert torch.allclose(y, want, atol=1e-5)
    assert torch.allclose(w.grad, ((want > 0).float().reshape(-1, 12).t() @ x.reshape(-1, 16)), atol=1e-4)


def test_a_layer_without_a_fused_relu_gets_a_separate_one():
    layer = torch.nn.Linear(16, 12)  # as the int8 layers are: no `relu` argument
    x = torch.randn(4, 16)
    assert torch.equal(linear.linear_relu(layer, x), F.relu(layer(x)))


@needs_onednn
def test_a_model_made_in_inference_mode_is_left_unpacked_and_still_decodes(onednn):
    src = torch.tensor([[5, 6, 7, EOS]])
    tgt = torch.tensor([[BOS, 20, 21]])
    with torch.inference_mode():
        model = tiny().eval()  # its weights are inference tensors: no version counter to check a packed copy by
        model.prepack()
        assert model.output_packed is None and model.decoder[0].ffn.w_1.packed is None
        assert model(src, tgt).shape == (1, 3, model.cfg.target_vocab_size)


@needs_onednn
def test_where_measurement_keeps_mkl_each_weight_is_packed_only_if_it_measures_faster_packed(monkeypatch):
    monkeypatch.setenv(linear.BACKEND_ENV, "auto")
    monkeypatch.setattr(linear, "onednn_speedup", lambda d_model, training: 0.9)  # MKL kept for plain products
    timed = []

    def speedup(in_features, out_features, bias, relu):
        timed.append((in_features, out_features, bias, relu))
        return 1.3 if out_features == 40 else 1.02  # the output layer (d_model -> tiny()'s 40 words) gains, no other

    monkeypatch.setattr(linear, "packed_speedup", speedup)
    assert linear.use_best_backend(torch.device("cpu"), training=False)[0] == "default"
    model = tiny().eval()
    model.prepack()
    assert model.output_packed is not None
    assert all(m.packed is None for m in model.modules() if isinstance(m, linear.Linear))
    d, d_ff = model.cfg.d_model, model.cfg.d_ff
    assert (d, 40, False, False) in timed and (d, d_ff, True, True) in timed  # the first FFN layer: its ReLU too
    assert {(inputs, out) for inputs, out, _, relu in timed if relu} == {(d, d_ff)}  # and no other layer
    src, tgt = torch.tensor([[5, 6, 7, EOS]]), torch.tensor([[BOS, 20, 21]])
    with torch.no_grad():
        packed = model(src, tgt)
        model.output_packed = None
        assert torch.allclose(packed, model(src, tgt), atol=1e-5)  # the packed product, read through oneDNN


@needs_onednn
def test_a_pinned_backend_packs_by_the_pin_and_never_measures(monkeypatch):
    monkeypatch.setattr(linear, "packed_speedup", lambda *shape: pytest.fail("measured"))
    for pin, packed in (("default", False), ("onednn", True)):
        linear.reset()
        monkeypatch.setenv(linear.BACKEND_ENV, pin)
        linear.use_best_backend(torch.device("cpu"), training=False)
        assert (linear.pack(torch.randn(8, 4)) is not None) == packed


@needs_onednn
def test_the_packed_speedup_is_a_ratio_of_two_timings():
    for relu in (False, True):
        assert 0.0 < linear.packed_speedup(16, 24, True, relu, rows=(2, 8)) < float("inf")
