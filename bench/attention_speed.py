"""Attention at translation's shapes on the CPU: PyTorch's fused kernel against two matrix products and a softmax.

    python bench/attention_speed.py              # the Multi30k recipe's shapes, 2 threads
    python bench/attention_speed.py --threads 1

mtkit's attention (mtkit/kernels/attention.py, called by `MultiHeadAttention.attend`) takes the math
path on the CPU where `math_attention_is_faster` says so (by dtype, length and whether a gradient
is recorded) and the fused `scaled_dot_product_attention` otherwise; these figures are its evidence.
This script times both at the shapes a beam-4 decoding of ~1,000 rows meets (one
query against a cache of t positions; a sentence's beams against its source; an encoder
batch) and at training batches of ~4,000 tokens with their backward pass (fp32 and bf16
autocast, 4 and 8 heads, 14 to 250 tokens), and prints one line each and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from procstat import cpu_name  # a sibling script: python puts bench/ on the path

from mtkit.kernels.attention import attention_math


def seconds(fn: Callable[[], object], repeat: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def training_case(dtype: str, heads: int, batch: int, length: int, d: int, g: torch.Generator) -> dict:
    """Forward + backward of one masked self-attention, fused kernel against `attention_math`, in ms."""
    xs = [torch.randn(batch, length, heads * d, generator=g, requires_grad=True) for _ in range(3)]
    grad = torch.randn(batch, heads, length, d, generator=g)
    mask = torch.ones(batch, 1, 1, length, dtype=torch.bool)
    mask[: batch // 2, ..., -(length // 5) :] = False  # half the sentences end early: padding
    low = dtype == "bf16"

    def run(attention: Callable[..., torch.Tensor]) -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=low):
            q, k, v = (x.to(torch.bfloat16) if low else x for x in xs)
            q, k, v = (t.view(batch, length, heads, d).transpose(1, 2) for t in (q, k, v))
            out = attention(q, k, v, mask)
        out.float().backward(grad)

    def fused(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def math_(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return attention_math(q, k, v, mask, False)

    repeat = 5
    return {
        "case": f"training {dtype}, {heads} heads, {batch} x {length}",
        "fused_ms": seconds(lambda: run(fused), repeat) * 1e3,
        "math_ms": seconds(lambda: run(math_), repeat) * 1e3,
        "max_abs_diff": None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    H, d = 4, 64
    rows = []

    def case(name: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> None:
        with torch.inference_mode():
            fused = seconds(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), args.repeat)
            math_ = seconds(lambda: attention_math(q, k, v, mask, False), args.repeat)
            ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            err = (attention_math(q, k, v, mask, False) - ref).abs().max().item()
        rows.append({"case": name, "fused_ms": fused * 1e3, "math_ms": math_ * 1e3, "max_abs_diff": err})

    # A decoding step's self-attention: 1,000 rows, one query, 15 cached positions kept time first.
    cache = torch.randn(40, 1000, H, d, generator=g)[:15].permute(1, 2, 0, 3)
    case("decode self-attention (1000 rows, t=15)", torch.randn(1000, H, 1, d, generator=g), cache, cache, None)
    # A step's cross-attention: 250 sentences, their 4 beams' queries against 16 source positions.
    memory = torch.randn(250, H, 16, d, generator=g)
    mask = torch.ones(250, 1, 1, 16, dtype=torch.bool)
    case("decode cross-attention (250 x 4 beams, S=16)", torch.randn(250, H, 4, d, generator=g), memory, memory, mask)
    # The encoder on a batch of 250 sentences of 16 tokens.
    case("encoder self-attention (250 x 16)", memory, memory, memory, mask)

    # Training: forward and backward through each path, with a dense gradient, in fp32 and under bf16 autocast,
    # at Multi30k's lengths (~14 tokens) and WMT's (25-250). q, k and v are views of a projection's output split
    # into heads, as the model makes them; batches hold ~4,000 tokens.
    for dtype in ("fp32", "bf16"):
        for heads in (4, 8):
            for batch, length in ((290, 14), (150, 27), (128, 32), (64, 64), (32, 128), (16, 250)):
                rows.append(training_case(dtype, heads, batch, length, d, g))
    print(f"{'case':<46} {'fused ms':>9} {'math ms':>9} {'fused/math':>10}")
    for r in rows:
        print(f"{r['case']:<46} {r['fused_ms']:9.2f} {r['math_ms']:9.2f} {r['fused_ms'] / r['math_ms']:9.2f}x")
    print(json.dumps({"bench": "attention_speed", "threads": args.threads, "cpu": cpu_name(), "rows": rows}))


if __name__ == "__main__":
    main()
