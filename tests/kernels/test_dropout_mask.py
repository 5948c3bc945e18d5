"""The CPU dropout: keeps 1 - p of the values, scaled by 1 / (1 - p), the same mask forward and backward, seeded."""

from __future__ import annotations

import pytest
import torch

from mtkit.kernels.dropout import dropout
from mtkit.model.dropout import Dropout


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_it_keeps_one_minus_p_of_the_values_and_scales_them(dtype):
    torch.manual_seed(0)
    x = torch.ones(400, 500, dtype=dtype)
    y = dropout(x, 0.1, training=True)
    kept = y.ne(0)
    assert y.dtype == dtype
    assert abs(kept.float().mean().item() - 0.9) < 0.005  # 200,000 draws: the standard error is 0.0007
    assert torch.allclose(y[kept].float(), torch.full((int(kept.sum()),), 1 / 0.9), rtol=1e-2)


def test_the_gradient_uses_the_forward_mask():
    torch.manual_seed(1)
    x = torch.randn(64, 32, requires_grad=True)
    y = dropout(x, 0.3, training=True)
    y.backward(torch.ones_like(y))
    assert torch.equal(x.grad.ne(0), y.ne(0))
    assert torch.allclose(x.grad[y.ne(0)], torch.full((int(y.ne(0).sum()),), 1 / 0.7))


def test_the_same_seed_gives_the_same_mask():
    x = torch.randn(50, 50)
    masks = []
    for _ in range(2):
        torch.manual_seed(7)
        masks.append(dropout(x, 0.5, training=True).ne(0))
    assert torch.equal(*masks)
    assert not torch.equal(masks[0], dropout(x, 0.5, training=True).ne(0))


def test_evaluation_and_p_zero_are_the_identity():
    x = torch.randn(8, 8)
    assert dropout(x, 0.5, training=False) is x and dropout(x, 0.0, training=True) is x
    module = Dropout(0.2).eval()
    assert module(x) is x and module.p == 0.2
