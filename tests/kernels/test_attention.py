"""The two attention paths compute Eq. (1) alike (inference and training), the rule picks by shape, the short-row
softmax equals torch's, and CUDA's fused path runs without cuDNN's kernel."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from mtkit.kernels.attention import attention_math, fused_attention, math_attention_is_faster, softmax


@pytest.mark.parametrize("case", ["mask", "causal", "offset-causal", "none"])
def test_the_cpu_inference_attention_equals_the_fused_kernel(case):
    g = torch.Generator().manual_seed(0)
    T, S = (3, 5) if case == "offset-causal" else (4, 4) if case == "causal" else (4, 6)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g, dtype=torch.float64) for n in (T, S, S))
    mask, causal = None, False
    if case == "mask":
        mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None, None, :]
    elif case == "causal":
        causal = True
    elif case == "offset-causal":  # a block of queries after S - T cached positions
        mask = torch.ones(T, S, dtype=torch.bool).tril(diagonal=S - T)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    assert torch.allclose(attention_math(q, k, v, mask, causal), want, atol=1e-12)


@pytest.mark.parametrize("case", ["mask", "causal"])
def test_the_math_attention_trains_as_the_fused_kernel(case):
    """Forward and backward: the same outputs and gradients as scaled_dot_product_attention."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64) for _ in range(3))
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])[:, None, None, :] if case == "mask" else None
    grad = torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64)
    results = []
    for attention in (F.scaled_dot_product_attention, attention_math):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        if attention is attention_math:
            out = attention_math(*leaves, mask, case == "causal")
        else:
            out = F.scaled_dot_product_attention(*leaves, attn_mask=mask, is_causal=case == "causal")
        out.backward(grad)
        results.append([out.detach()] + [t.grad for t in leaves])
    for want, got in zip(*results):
        assert torch.allclose(got, want, atol=1e-12)


def test_the_math_attention_keeps_float32_scores_under_bf16_autocast():
    """In training under autocast, q and k are bf16 but the scores are not rounded to bf16: the output is the
    float32 computation's on the same inputs (up to the bf16 rounding of the probabilities and of the output)."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (8 * torch.randn(4, 2, 6, 16, generator=g) for _ in range(3))  # large scores: rounding them shows
    q, k, v = (t.bfloat16().requires_grad_() for t in (q, k, v))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = attention_math(q, k, v, None, False)
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    rounded_scores = (q * 0.25) @ k.transpose(-1, -2)  # bf16 scores, as a bf16 product would leave them
    with_rounded = rounded_scores.float().softmax(-1) @ v.float()
    assert out.dtype == torch.bfloat16
    error, rounded_error = (out.float() - want).abs().max(), (with_rounded - want).abs().max()
    assert error < rounded_error / 4
    out.float().sum().backward()
    assert all(t.grad is not None and t.grad.dtype == torch.bfloat16 for t in (q, k, v))


def test_the_math_attention_drops_probabilities():
    """With v the identity the output is the attention weights: dropout zeroes about p of them and scales the rest."""
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 32, 32), torch.randn(2, 4, 32, 32)
    v = torch.eye(32).expand(2, 4, 32, 32)
    weights = attention_math(q, k, v, None, False)
    dropped = attention_math(q, k, v, None, False, dropout_p=0.25)
    zero = dropped.eq(0)
    assert 0.22 < zero.float().mean() < 0.28
    assert torch.allclose(dropped[~zero], weights[~zero] / 0.75)


def test_the_math_path_is_taken_where_it_measured_faster():
    def faster(dtype, T, S, grad, device="cpu"):
        q, k = torch.empty(1, 1, T, 8, dtype=dtype, device=device), torch.empty(1, 1, S, 8, dtype=dtype, device=device)
        with torch.set_grad_enabled(grad):
            return math_attention_is_faster(q, k)

    fp32, bf16 = torch.float32, torch.bfloat16
    assert not faster(fp32, 14, 14, grad=True)
    assert faster(bf16, 128, 128, grad=True) and not faster(bf16, 250, 250, grad=True)
    assert faster(fp32, 1, 200, grad=False) and faster(fp32, 16, 16, grad=False)
    assert not faster(fp32, 17, 17, grad=False)
    assert faster(bf16, 64, 64, grad=False) and not faster(bf16, 65, 65, grad=False)
    assert not faster(bf16, 14, 14, grad=True, device="meta")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_short_row_softmax_equals_torchs(dtype):
    g = torch.Generator().manual_seed(0)
    # Rows below 16 long computed by mtkit, from 16 on by torch.softmax; a few rows (up to 1,024 scores) by torch too.
    for rows, length in itertools.product((5, 200), (1, 2, 7, 15, 16, 33)):
        scores = (4 * torch.randn(3, 2, rows, length, generator=g)).to(dtype)
        scores[0, 0, 0, : length // 2] = -math.inf  # masked positions
        got = softmax(scores)
        assert got.dtype == torch.float32 and got.shape == scores.shape
        assert torch.allclose(got, scores.float().softmax(-1), atol=1e-6)
        assert torch.allclose(got.sum(-1), torch.ones(3, 2, rows))


class OnCuda:
    """Stands in for a CUDA tensor where only its device is read (this machine may have no GPU)."""

    device = torch.device("cuda")

    def __init__(self, fail: bool = False):
        self.fail = fail


def test_cuda_attention_runs_without_cudnns_kernel_and_leaves_the_switch_as_it_was(monkeypatch):
    """cuDNN's kernel plans anew for every shape (docs/benchmarks.md: seconds a decoding step on an H200):
    off for the call on CUDA, back on after it, even when the call fails; a caller's own 'off' is kept."""
    seen = []

    def fused(q, k, v, **kwargs):
        seen.append(torch.backends.cuda.cudnn_sdp_enabled())
        if getattr(q, "fail", False):
            raise RuntimeError("out of memory")
        return q

    monkeypatch.setattr(F, "scaled_dot_product_attention", fused)
    q = OnCuda()
    assert torch.backends.cuda.cudnn_sdp_enabled()
    assert fused_attention(q, q, q, None, False, 0.0) is q
    assert seen == [False] and torch.backends.cuda.cudnn_sdp_enabled()
    failing = OnCuda(fail=True)
    with pytest.raises(RuntimeError, match="out of memory"):
        fused_attention(failing, failing, failing, None, False, 0.0)
    assert seen[-1] is False and torch.backends.cuda.cudnn_sdp_enabled()
    cpu = torch.randn(1, 2, 3, 4)
    assert fused_attention(cpu, cpu, cpu, None, False, 0.0) is cpu
    assert seen[-1] is True  # the CPU: the switch is not touched
    torch.backends.cuda.enable_cudnn_sdp(False)
    try:
        fused_attention(q, q, q, None, False, 0.0)
        assert seen[-1] is False and not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)
