"""PyTorch's fused attention on a GPU at translation's ever-changing shapes: with its cuDNN kernel allowed, and without.

    python bench/cuda_attention.py            # needs a CUDA GPU; bf16, fp16 and fp32

PyTorch picks cuDNN's attention kernel, where it may, ahead of the others on some GPUs (Hopper), and
cuDNN builds an execution plan for every new shape of query, key and mask. Translation meets a new
shape all the time: every training batch has its own lengths, and every decoding step's keys are
one position longer than the last step's. This script times, for each dtype, a run of calls that
each have a new shape, as mtkit meets them (`MultiHeadAttention.attend` in
mtkit/model/transformer.py):

- decoding: 1,000 rows (250 sentences x beam 4), one query each against 8 heads' cached keys of
  1, 2, ... 40 positions, with a padding mask (cross-attention's shape grows with the batch's source);
- training: a batch of ~4,000 tokens of length 20 ... 59 (one length a call), self-attention with a
  padding mask, forward and backward.

Each case first runs once at a shape outside the timed ones (CUDA's start-up costs), then the timed
shapes once each. Prints a line per case and a JSON line. The per-call time with cuDNN allowed, against
the others, is the evidence for `fused_attention`'s choice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

HEADS, D = 8, 64


def decoding_call(dtype: torch.dtype, keys: int) -> Callable[[], object]:
    q = torch.randn(1000, HEADS, 1, D, device="cuda", dtype=dtype)
    k, v = (torch.randn(1000, HEADS, keys, D, device="cuda", dtype=dtype) for _ in range(2))
    mask = torch.ones(1000, 1, 1, keys, device="cuda", dtype=torch.bool)
    mask[::2, ..., -1] = False
    return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def training_call(dtype: torch.dtype, length: int) -> Callable[[], object]:
    batch = 4000 // length
    q, k, v = (torch.randn(batch, HEADS, length, D, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
    mask = torch.ones(batch, 1, 1, length, device="cuda", dtype=torch.bool)
    mask[::2, ..., -2:] = False
    grad = torch.randn(batch, HEADS, length, D, device="cuda", dtype=dtype)

    def run() -> None:
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.1).backward(grad)

    return run


def per_call_ms(make: Callable[[torch.dtype, int], Callable[[], object]], dtype: torch.dtype, sizes: range) -> float:
    make(dtype, sizes.stop + 7)()  # start-up, at a shape that is not timed
    calls = [make(dtype, size) for size in sizes]
    torch.cuda.synchronize()
    start = time.perf_counter()
    for call in calls:
        call()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / len(calls) * 1e3


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("cuda_attention.py: no CUDA GPU here.")
    rows = []
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    cases = {"decoding": (decoding_call, range(1, 41)), "training": (training_call, range(20, 60))}
    for case, (make, sizes) in cases.items():
        for name, dtype in dtypes.items():
            row = {"case": case, "dtype": name}
            for cudnn in (True, False):
                torch.backends.cuda.enable_cudnn_sdp(cudnn)
                row["cudnn_allowed_ms" if cudnn else "without_cudnn_ms"] = round(per_call_ms(make, dtype, sizes), 3)
            torch.backends.cuda.enable_cudnn_sdp(True)
            rows.append(row)
            print(
                f"{case:<9} {name}: {row['cudnn_allowed_ms']:8.3f} ms a call with cuDNN allowed, "
                f"{row['without_cudnn_ms']:8.3f} without ({len(sizes)} shapes)",
                flush=True,
            )
    print(
        json.dumps(
            {"bench": "cuda_attention", "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
        )
    )


if __name__ == "__main__":
    main()
