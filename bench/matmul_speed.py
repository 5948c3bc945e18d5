"""The model's fp32 matrix products on the CPU: PyTorch's default (MKL on x86) against oneDNN, forward and backward.

    python bench/matmul_speed.py                 # 2 threads
    python bench/matmul_speed.py --threads 1

mtkit's linear maps (mtkit/runtime/matmul.py) pick their fp32 CPU backend by measurement. This
script times both backends at the shapes that matter: a decoding step of ~1,000 rows of the
Multi30k recipe's model (d_model 256, 8k vocabulary) and a training batch of ~4,000 tokens of
`base` (512 / 2048, 37k vocabulary): the forward product x W^T, and the backward products
dy W (dx) and dy^T x (dW). Prints GFLOP/s per shape and backend and, last, a JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from procstat import cpu_name  # a sibling script: python puts bench/ on the path

from mtkit.kernels.linear import onednn_linear
from mtkit.runtime.matmul import onednn_works

# (what, rows M, in K, out N)
SHAPES = [
    ("decode: qkv projection", 1000, 256, 768),
    ("decode: ffn w_1", 1000, 256, 1024),
    ("decode: ffn w_2", 1000, 1024, 256),
    ("decode: output layer 8k", 1000, 256, 8000),
    ("train base: qkv projection", 4000, 512, 1536),
    ("train base: ffn w_1", 4000, 512, 2048),
    ("train base: ffn w_2", 4000, 2048, 512),
    ("train base: output layer 37k", 4000, 512, 37000),
]


def best_seconds(fn: Callable[[], object], repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5, help="timed calls per product; the best counts")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if not onednn_works():
        raise SystemExit("this PyTorch build has no working oneDNN linear op: nothing to compare")
    print(f"CPU: {cpu_name()} | torch {torch.__version__} | {args.threads} threads | best of {args.repeat}")
    rows = []
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for what, M, K, N in SHAPES:
            x, w, dy = torch.randn(M, K, generator=g), torch.randn(N, K, generator=g), torch.randn(M, N, generator=g)
            products = {  # (default, oneDNN) as (a, b) for a b^T
                "forward": (x, w),
                "dx": (dy, w.t()),
                "dW": (dy.t(), x.t()),
            }
            flops = 2 * M * K * N
            for kind, (p, q) in products.items():
                a = best_seconds(lambda p=p, q=q: F.linear(p, q), args.repeat)
                b = best_seconds(lambda p=p, q=q: onednn_linear(p, q, None), args.repeat)
                row = {
                    "shape": what,
                    "product": kind,
                    "m_k_n": [M, K, N],
                    "default_gflops": round(flops / a / 1e9, 1),
                    "onednn_gflops": round(flops / b / 1e9, 1),
                    "speedup": round(a / b, 2),
                }
                rows.append(row)
                print(
                    f"{what:30s} {kind:8s} default {row['default_gflops']:6.1f}  oneDNN {row['onednn_gflops']:6.1f}"
                    f" GFLOP/s  {row['speedup']:.2f}x",
                    flush=True,
                )
    print(json.dumps({"cpu": cpu_name(), "threads": args.threads, "torch": torch.__version__, "products": rows}))


if __name__ == "__main__":
    main()
