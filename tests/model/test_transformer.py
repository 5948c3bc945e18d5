"""Invariants of the paper's Transformer: size, cache = full pass, no padding leak, causality."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import mtkit
from mtkit.config import BOS, EOS, PAD
from mtkit.errors import MtkitError
from mtkit.model.transformer import attention_math, fused_attention, math_attention_is_faster, softmax


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("preset, low, high", [("base", 60e6, 66e6), ("big", 208e6, 218e6)])
def test_parameter_counts_match_the_paper(preset, low, high):
    with torch.device("meta"):  # counts shapes without allocating 0.9 GB for `big`
        model = mtkit.build_model(preset, 37000)
    assert low <= n_params(model) <= high


def test_presets_carry_the_papers_numbers():
    base, big = mtkit.PRESETS["base"].model, mtkit.PRESETS["big"].model
    assert (base.encoder_layers, base.decoder_layers, base.d_model, base.d_ff, base.heads, base.dropout) == (
        6,
        6,
        512,
        2048,
        8,
        0.1,
    )
    assert (big.encoder_layers, big.d_model, big.d_ff, big.heads, big.dropout) == (6, 1024, 4096, 16, 0.3)
    assert mtkit.PRESETS["base"].train.label_smoothing == 0.1 and mtkit.PRESETS["base"].train.warmup == 4000
    assert mtkit.PRESETS["base"].train.adam_betas == (0.9, 0.98) and mtkit.PRESETS["base"].train.adam_eps == 1e-9
    assert (mtkit.PRESETS["base"].train.max_steps, mtkit.PRESETS["big"].train.max_steps) == (100_000, 300_000)


def tiny(seed: int = 0, vocab: int = 40, **overrides) -> mtkit.Transformer:
    torch.manual_seed(seed)
    return mtkit.build_model("tiny", vocab, **overrides).eval()


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.tensor([[5, 6, 7, 8, 9, EOS], [10, 11, EOS, PAD, PAD, PAD], [12, 13, 14, EOS, PAD, PAD]])
    tgt_in = torch.tensor([[BOS, 20, 21, 22, 23], [BOS, 24, PAD, PAD, PAD], [BOS, 25, 26, 27, PAD]])
    return src, tgt_in


@pytest.mark.parametrize("pre_norm", [False, True])
def test_step_by_step_decoding_with_cache_equals_the_full_pass(pre_norm):
    model = tiny(pre_norm=pre_norm)
    src, tgt_in = batch()
    with torch.no_grad():
        full = model(src, tgt_in)
        cache = model.init_cache(model.encode(src))
        steps = []
        for t in range(tgt_in.size(1)):
            logits, cache = model.decode_step(tgt_in[:, t : t + 1], cache)
            steps.append(logits)
    assert cache.length == tgt_in.size(1)
    assert (torch.cat(steps, dim=1) - full).abs().max() < 1e-4


def test_decoding_a_block_after_a_cached_prefix_equals_the_full_pass():
    model = tiny()
    src, tgt_in = batch()
    with torch.no_grad():
        full = model(src, tgt_in)
        cache = model.init_cache(model.encode(src))
        first, cache = model.decode_step(tgt_in[:, :2], cache)
        rest, cache = model.decode_step(tgt_in[:, 2:], cache)
    assert (torch.cat([first, rest], dim=1) - full).abs().max() < 1e-4


def test_padding_does_not_leak_into_real_positions():
    model = tiny()
    src, tgt_in = batch()
    with torch.no_grad():
        together = model.encode(src)
        logits = model.decode(tgt_in, together)
        for i, (s_len, t_len) in enumerate([(6, 5), (3, 2), (4, 4)]):
            alone = model.encode(src[i : i + 1, :s_len])
            assert (alone.memory[0] - together.memory[i, :s_len]).abs().max() < 1e-5
            alone_logits = model.decode(tgt_in[i : i + 1, :t_len], alone)
            assert (alone_logits[0] - logits[i, :t_len]).abs().max() < 1e-5


def test_the_decoder_is_causal():
    model = tiny()
    src, tgt_in = batch()
    with torch.no_grad():
        before = model(src, tgt_in)
        for t in range(1, tgt_in.size(1)):
            changed = tgt_in.clone()
            changed[:, t] = 30
            after = model(src, changed)
            assert (after[:, :t] - before[:, :t]).abs().max() == 0  # earlier positions untouched
            assert (after[0, t:] - before[0, t:]).abs().max() > 0  # and the change is seen from t on


def test_reordering_the_cache_follows_the_selected_rows():
    model = tiny()
    src, tgt_in = batch()
    index = torch.tensor([2, 2, 0, 1])
    with torch.no_grad():
        cache = model.init_cache(model.encode(src))
        _, cache = model.decode_step(tgt_in[:, :2], cache)
        reordered, _ = model.decode_step(tgt_in[index, 2:3], cache.reorder(index))
        expected = model(src[index], tgt_in[index, :3])[:, 2:3]
    assert (reordered - expected).abs().max() < 1e-5


def test_embeddings_are_shared_by_default_and_can_be_untied():
    shared = tiny()
    assert shared.src_embed.table is shared.tgt_embed.table and shared.output_proj is None
    untied = tiny(vocab=40, tgt_vocab_size=55, share_embeddings="none")
    assert untied.src_embed.table.num_embeddings == 40 and untied.tgt_embed.table.num_embeddings == 55
    src, tgt_in = batch()
    assert untied(src, tgt_in).shape == (3, 5, 55)
    with pytest.raises(MtkitError, match="share_embeddings"):
        tiny(vocab=40, tgt_vocab_size=55)  # "all" needs one joint vocabulary


def test_positions_beyond_the_maximum_are_refused():
    model = tiny()
    too_long = torch.full((1, model.cfg.max_positions + 1), 5)
    with pytest.raises(ValueError, match="max_positions"):
        model.encode(too_long)


def test_same_seed_same_weights():
    a, b = tiny(seed=3), tiny(seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_the_self_attention_cache_is_written_and_reordered_in_place():
    model = tiny()
    src, tgt_in = batch()
    with torch.no_grad():
        cache = model.init_cache(model.encode(src), capacity=3)
        _, cache = model.decode_step(tgt_in[:, :1], cache)
        buffer = cache.layers[0].self_k.data_ptr()
        _, cache = model.decode_step(tgt_in[:, 1:2], cache)
        assert cache.layers[0].self_k.data_ptr() == buffer  # written in place, no torch.cat
        rows = torch.tensor([2, 0, 2])  # row 1 is dropped, row 2 is repeated
        cache = cache.reorder(rows)
        assert cache.layers[0].self_k.data_ptr() == buffer  # reordered in place, no new buffer
        logits, cache = model.decode_step(tgt_in[rows, 2:4], cache)  # grows past its 3 positions
        assert cache.layers[0].self_k.size(0) >= 4
        expected = model(src[rows], tgt_in[rows, :4])[:, 2:4]
    assert (logits - expected).abs().max() < 1e-5


def test_an_in_place_reorder_copies_only_the_rows_that_move(monkeypatch):
    model = tiny()
    src, tgt_in = batch()
    copied = []
    real = torch.Tensor.index_copy_
    monkeypatch.setattr(
        torch.Tensor,
        "index_copy_",
        lambda self, dim, index, source: copied.append(index.tolist()) or real(self, dim, index, source),
    )
    with torch.no_grad():
        cache = model.init_cache(model.encode(src), capacity=4)
        _, cache = model.decode_step(tgt_in[:, :2], cache)
        cache = cache.reorder(torch.tensor([0, 0, 2]))  # rows 0 and 2 stay where they are
        history = cache.history
        assert history is not None and history.size(2) == 3
        # the history as a matrix, one row per (tensor, position, row): row 1 of each of the 2 positions only
        moved_history = [(b * history.size(1) + t) * 3 + 1 for b in range(history.size(0)) for t in range(2)]
        # and, per layer and tensor, row 1's own copy of its sentence's cross-attention keys/values
        assert sorted(copied) == [[1]] * history.size(0) + [moved_history]
        copied.clear()
        cache = cache.reorder(torch.tensor([0, 1, 2]))
        assert not copied  # nothing moves, nothing is copied
        logits, _ = model.decode_step(tgt_in[[0, 0, 2], 2:3], cache)
        expected = model(src[[0, 0, 2]], tgt_in[[0, 0, 2], :3])[:, 2:3]
    assert (logits - expected).abs().max() < 1e-5


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
    for length in (1, 2, 7, 15, 16, 33):  # below 16 computed by mtkit, from 16 on by torch.softmax
        scores = (4 * torch.randn(3, 2, 5, length, generator=g)).to(dtype)
        scores[0, 0, 0, : length // 2] = -math.inf  # masked positions
        got = softmax(scores)
        assert got.dtype == torch.float32 and got.shape == scores.shape
        assert torch.allclose(got, scores.float().softmax(-1), atol=1e-6)
        assert torch.allclose(got.sum(-1), torch.ones(3, 2, 5))


class OnCuda:
    """Stands in for a CUDA tensor where only its device is read (this machine may have no GPU)."""

    device = torch.device("cuda")

    def __init__(self, fail: bool = False):
        self.fail = fail


def test_cuda_attention_runs_without_cudnns_kernel_and_leaves_the_switch_as_it_was(monkeypatch):
    """cuDNN's kernel plans anew for every shape (bench/cuda_attention.py: ~130 ms a decoding step on an H200):
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
