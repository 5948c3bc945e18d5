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

    Measured on a 2-core Zen 4 EPYC (`python bench/attention_speed.py`, training cases forward + backward
    with 4 and 8 heads); the fused CPU kernel is tiled for long blocks of queries and keys, and
    translation's are short.
    - Training in bf16 or fp16 (autocast): up to 128 positions. The fused kernel's backward pass in bf16
      is slow on the CPU: 135 ms against 31 for 290 sentences of 14 tokens with 8 heads (`base` on
      Multi30k), 4.3-4.5x at 14 tokens, 1.7-1.8x at 128; at 250 the fused kernel is even or ahead (0.8-1.0x).
    - Training in fp32: never. The math path measured 1.1-2.0x per call below 32 tokens (0.6-0.9x from 32),
      but whole `small` fp32 updates on Multi30k did not gain (2,703 and 2,728 target tokens/s against
      2,840 and 2,689, alternating) and peak RSS rose by 80-150 MB, past fairseq's.
    - No gradient: query blocks of at most 16 (a decoding step's one query per row, a sentence's beams
      against its source, an encoder's 16-token sentences: 1.0-4.6x in fp32), and in bf16 or fp16 any
      block of at most 64 positions (1.7-3.7x; 0.5-1.4x at 128).
    Other devices always take the fused kernel.
    """
    if q.device.type != "cpu":
        return False
    longest = max(q.size(-2), k.size(-2))
    low = q.dtype in (torch.bfloat16, torch.float16)
    if torch.is_grad_enabled():
        return low and longest <= 128
    return q.size(-2) <= 16 or (low and longest <= 64)


def fused_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, dropout_p: float) -> Tensor:
    """PyTorch's fused attention (`scaled_dot_product_attention`), on a CUDA GPU without its cuDNN kernel.

    On a Hopper GPU PyTorch prefers cuDNN's kernel in bf16 and fp16, and cuDNN builds a plan for every
    new shape. Translation meets new shapes all the time (every batch's lengths in training, one more
    key at every decoding step), and the plans cost far more than the attention. On an H200 (torch 2.11,
    `python bench/cuda_attention.py`): a bf16 decoding step's attention 129 ms with cuDNN's kernel allowed,
    0.12 without; a training batch's, forward and backward, 276 ms and 0.53. Whole bf16 `base` training
    updates of 4,096 tokens took 0.31 s with it allowed, 0.066 without (fp32: 0.05); a bf16 beam search of
    1,000 sentences 12.6 s and 1.4. The flash and memory-efficient kernels need no plan. A caller who switched
    cuDNN's kernel off keeps it off.
    """
    if q.device.type != "cuda" or not torch.backends.cuda.cudnn_sdp_enabled():  # type: ignore[no-untyped-call]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal)
    torch.backends.cuda.enable_cudnn_sdp(False)  # 1.5 us, against ~30 for torch.nn.attention.sdpa_kernel
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
    autocast (rounding the scores to bf16 first, as fairseq's attention does, measured 1.3-1.6x faster
    and is not the fused kernel's arithmetic). The probabilities are narrowed to v's type for the second
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
    rows it is computed here as max, exp, sum and divide, each one pass over all rows at once: 4,096 rows
    of 12 took 433 us as torch.softmax and 86 us so on a 2-core Zen 4 EPYC (rows of 16 and longer:
    torch.softmax is the faster, 51 us against 93 for rows of 16). Few rows are the other way round: four
    passes cost four operations' overhead, so up to 1,024 scores (a one-sentence request's step: heads x keys)
    torch.softmax is the faster again (16 rows of 12: 4.0 us against 10.8; 64 rows of 12: 9.3 against 11.0;
    128 rows of 12: 17.2 against 13.2, same CPU). Its in-place passes leave nothing for a backward pass: under
    autograd `attention_math` calls torch's softmax instead.
    """
    x = scores.float() if scores.dtype in (torch.bfloat16, torch.float16) else scores
    # Traced by torch.compile (bench/compiled_step.py): inductor fuses the softmax, with no branch on the length.
    if torch.compiler.is_compiling() or x.size(-1) >= 16 or x.numel() <= 1024 or x.device.type != "cpu":
        return x.softmax(-1)
    weights = (x - x.amax(-1, keepdim=True)).exp_()
    return weights.div_(weights.sum(-1, keepdim=True))
