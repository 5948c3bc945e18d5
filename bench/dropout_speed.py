"""Dropout on the CPU: PyTorch's F.dropout (a bernoulli_ draw per element) against mtkit's (one integer draw).

    python bench/dropout_speed.py                # 2 threads
    python bench/dropout_speed.py --threads 1

Times forward and forward + backward at the activations of a 4,096-token `small` and `base`
batch (mtkit/kernels/dropout.py), best of --repeat, and prints one line each and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from translate_speed import cpu_name  # a sibling script: python puts bench/ on the path

from mtkit.kernels.dropout import dropout

SHAPES = [
    ("small: d_model", 3840, 256),
    ("small: d_ff", 3840, 1024),
    ("base: d_model", 3840, 512),
    ("base: d_ff", 3840, 2048),
]


def best_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--p", type=float, default=0.1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"CPU: {cpu_name()} | torch {torch.__version__} | {args.threads} threads | p {args.p}")
    rows = []
    for what, rows_, width in SHAPES:
        x = torch.randn(rows_, width, requires_grad=True)
        grad = torch.randn(rows_, width)
        kernels = {"torch": lambda x: F.dropout(x, args.p, True), "mtkit": lambda x: dropout(x, args.p, True)}
        row: dict = {"shape": what, "size": [rows_, width]}
        for name, kernel in kernels.items():
            with torch.no_grad():
                row[f"{name}_forward_ms"] = round(best_ms(lambda k=kernel, x=x: k(x), args.repeat), 2)
            row[f"{name}_forward_backward_ms"] = round(
                best_ms(lambda k=kernel, x=x, g=grad: k(x).backward(g), args.repeat), 2
            )
        row["speedup"] = round(row["torch_forward_backward_ms"] / row["mtkit_forward_backward_ms"], 2)
        rows.append(row)
        print(
            f"{what:14s} forward torch {row['torch_forward_ms']:6.2f} mtkit {row['mtkit_forward_ms']:6.2f} ms | "
            f"forward+backward torch {row['torch_forward_backward_ms']:6.2f} mtkit "
            f"{row['mtkit_forward_backward_ms']:6.2f} ms | {row['speedup']:.2f}x",
            flush=True,
        )
    print(json.dumps({"cpu": cpu_name(), "threads": args.threads, "p": args.p, "rows": rows}))


if __name__ == "__main__":
    main()
