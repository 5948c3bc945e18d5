"""oneDNN's fp32 linear computes what PyTorch's default does, forward and backward, plain or from a packed weight."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mtkit.kernels.linear import PackedWeight, linear
from mtkit.runtime.matmul import onednn_works

needs_onednn = pytest.mark.skipif(not onednn_works(), reason="this PyTorch build has no oneDNN linear op")


def grads(onednn: bool, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None):
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    b = None if b is None else b.clone().requires_grad_()
    y = linear(x, w, b, onednn)
    (y * torch.linspace(-1, 1, y.numel()).view_as(y)).sum().backward()
    return y.detach(), x.grad, w.grad, None if b is None else b.grad


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(7, 16), (3, 5, 16)])
def test_onednn_forward_and_backward_equal_the_default(shape, bias):
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(*shape, generator=g), torch.randn(12, 16, generator=g)
    b = torch.randn(12, generator=g) if bias else None
    for got, want in zip(grads(True, x, w, b), grads(False, x, w, b)):
        if want is None:
            assert got is None
        else:
            assert got.shape == want.shape and torch.allclose(got, want, atol=1e-5)


@needs_onednn
def test_onednn_takes_strided_inputs():
    x = torch.randn(16, 7).t()  # (7, 16), not contiguous
    w = torch.randn(16, 12).t()
    assert torch.allclose(linear(x, w, onednn=True), F.linear(x, w), atol=1e-5)


@needs_onednn
def test_onednn_leaves_other_dtypes_and_autocast_to_pytorch():
    x, w = torch.randn(4, 8, dtype=torch.float64), torch.randn(3, 8, dtype=torch.float64)
    assert torch.equal(linear(x, w, onednn=True), F.linear(x, w))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert linear(x.float(), w.float(), onednn=True).dtype == torch.bfloat16  # autocast's own bf16 product


@needs_onednn
def test_a_bias_alone_that_learns_gets_its_gradient():
    x, w = torch.randn(4, 8), torch.randn(3, 8)
    b = torch.zeros(3, requires_grad=True)
    linear(x, w, b, onednn=True).sum().backward()
    assert torch.equal(b.grad, torch.full((3,), 4.0))


@needs_onednn
def test_a_packed_weight_gives_the_same_products_and_is_dropped_once_the_weight_changes():
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(3, 5, 16, generator=g), torch.randn(12, 16, generator=g), torch.randn(12, generator=g)
    packed = PackedWeight(w)
    assert packed.tensor.is_mkldnn
    assert torch.allclose(linear(x, w, b, packed=packed), F.linear(x, w, b), atol=1e-5)
    w.add_(1.0)  # an optimizer step: in place, so the packed copy is stale
    assert not packed.valid_for(w)
    assert torch.allclose(linear(x, w, b, packed=packed), F.linear(x, w, b), atol=1e-5)
    moved = w.clone()  # a new tensor (as model.to makes) with the old version counter's value
    assert not packed.valid_for(moved)


@pytest.mark.parametrize("onednn", [False, True])
def test_the_fused_relu_equals_a_separate_one_with_and_without_gradients(onednn):
    if onednn and not onednn_works():
        pytest.skip("this PyTorch build has no oneDNN linear op")
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(3, 5, 16, generator=g), torch.randn(12, 16, generator=g), torch.randn(12, generator=g)
    want = F.relu(F.linear(x, w, b))
    packed = PackedWeight(w) if onednn else None
    with torch.no_grad():
        got = linear(x, w, b, onednn, packed, relu=True)
    assert torch.allclose(got, want, atol=1e-5) and bool((got == 0).any())  # some outputs were negative
    w.requires_grad_()
    y = linear(x, w, b, onednn, relu=True)
    y.sum().backward()
    assert torch.allclose(y, want, atol=1e-5)
    assert torch.allclose(w.grad, ((want > 0).float().reshape(-1, 12).t() @ x.reshape(-1, 16)), atol=1e-4)
