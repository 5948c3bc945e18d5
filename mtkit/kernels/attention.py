"""Eq. (1) of section 3.2.1, two ways: PyTorch's fused kernel (`scaled_dot_product_attention`, on a GPU without
cuDNN's) or two batched products around a softmax (`attention_math`), and the fixed rule, by device, shape and
dtype, that says which is faster.

Not in the paper: engineering choices of kernel, measured once on this project's CPUs and written down as a
rule (`math_attention_is_faster`); nothing here measures or remembers anything at run time.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from mtkit.kernels.dropout import dropout


def math_attention_is_faster(q: Tensor, k: Tensor) -> bool:
    """Whether `attention_math` beats PyTorch's fused kernel (flash attention) here: on the CPU, by shape and dtype.

    The fused CPU kernel is tiled for long blocks of queries and keys, and translation's are short. The
    bounds below are where the math path measured faster (docs/benchmarks.md, "Figures behind the code's choices": this
    module):
    - Training in bf16 or fp16 (autocast): up to 128 positions (the fused kernel's bf16 backward pass is
      slow on the CPU).
    - Training in fp32: never (faster per call on short blocks, but whole updates did not gain, and the
      peak memory rose).
    - No gradient: query blocks of at most 16 (a decoding step's one query per row, a sentence's beams
      against its source, an encoder's 16-token sentences), and in bf16 or fp16 any block of at most 64
      positions.
    Other devices always take the fused kernel.
    """
    if q.device.type != "cpu":
        return False
    if torch.compiler.is_exporting():  # no branch on a dynamic length: inductor fuses the math form's softmax
        return True
    longest = max(q.size(-2), k.size(-2))
    low = q.dtype in (torch.bfloat16, torch.float16)
    if torch.is_grad_enabled():
        return low and longest <= 128
    return q.size(-2) <= 16 or (low and longest <= 64)


def fused_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, dropout_p: float) -> Tensor:
    """PyTorch's fused attention (`scaled_dot_product_attention`), on a CUDA GPU without its cuDNN kernel.

    On a Hopper GPU PyTorch prefers cuDNN's kernel in bf16 and fp16, and cuDNN builds a plan for every
    new shape. Translation meets new shapes all the time (every batch's lengths in training, one more
    key at every decoding step), and the plans cost far more than the attention: on an H200 whole bf16 training
    updates and beam searches ran several times faster without it (docs/benchmarks.md, "Figures behind the code's
    choices": this module). The flash and memory-efficient kernels need no plan. A caller who switched
    cuDNN's kernel off keeps it off.
    """
    if q.device.type != "cuda" or not torch.backends.cuda.cudnn_sdp_enabled():  # type: ignore[no-untyped-call]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal)
    torch.backends.cuda.enable_cudnn_sdp(False)  # far cheaper than torch.nn.attention.sdpa_kernel
    try:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal)
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)


def attention_math(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, dropout_p: float = 0.0
) -> Tensor:
    """Eq. (1) as two batched matrix products around a softmax (`math_attention_is_faster` says when).

    The softmax is float32 whatever q and k are. In training the scores are float32 too, as the fused
    kernel keeps them: bf16 or fp16 q and k are widened for the first product, which runs outside
    autocast (rounding the scores to bf16 first, as fairseq's attention does, measured faster and is not
    the fused kernel's arithmetic). The probabilities are narrowed to v's type for the second
    product. `causal` masks a square block (training); a block of queries after cached positions comes
    with its own `mask`. `dropout_p` drops attention probabilities (training only).
    """
    scale = q.size(-1) ** -0.5
    if torch.is_grad_enabled() and q.dtype in (torch.bfloat16, torch.float16):
        with torch.autocast(q.device.type, enabled=False):
            scores = torch.matmul(q.float() * scale, k.float().transpose(-1, -2))  # (B, H, T, S)
    else:
        scores = torch.matmul(q * scale, k.transpose(-1, -2))
    if causal:
        T, S = scores.shape[-2:]
        mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(diagonal=S - T)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = scores.softmax(-1) if torch.is_grad_enabled() else softmax(scores)
    weights = dropout(weights, dropout_p, dropout_p > 0.0)
    return torch.matmul(weights.to(v.dtype), v)  # (B, H, T, d_k)


def softmax(scores: Tensor) -> Tensor:
    """Softmax over the last dimension, in fp32 at least (bf16 and fp16 scores are widened first), without autograd.

    PyTorch's CPU softmax is slow on rows shorter than 16, its AVX-512 width in fp32 (9 ns an element on
    rows of 12, under 1 ns on rows of 32), and a decoding step's rows are short: a self-attention's as long
    as the output so far, a cross-attention's as the source (13 tokens on average in Multi30k). For those
    rows it is computed here as max, exp, sum and divide, each one pass over all rows at once, which measured
    faster on many short rows; torch.softmax stays the faster on rows of 16 and longer, and on few rows, where
    four passes cost four operations' overhead: up to 1,024 scores (a one-sentence request's step: heads x
    keys) (docs/benchmarks.md, "Figures behind the code's choices": this module). Its in-place passes leave nothing for
    a backward pass: under
    autograd `attention_math` calls torch's softmax instead.
    """
    x = scores.float() if scores.dtype in (torch.bfloat16, torch.float16) else scores
    # Traced by torch.compile: inductor fuses the softmax, with no branch on the length.
    if torch.compiler.is_compiling() or x.size(-1) >= 16 or x.numel() <= 1024 or x.device.type != "cpu":
        return x.softmax(-1)
    weights = (x - x.amax(-1, keepdim=True)).exp_()
    return weights.div_(weights.sum(-1, keepdim=True))
