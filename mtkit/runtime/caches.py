"""How many compiled oneDNN products a process keeps: a process setting, made by an entry point before any runs.

oneDNN keeps up to 1,024 compiled primitives (with their scratch buffers), one set per product shape, and
PyTorch's ideep layer as many again in an LRU cache of its own. Each cached product is compiled for one
(rows, in, out) shape, and a decoding step's row count changes whenever sentences finish, a training batch's
with its tokens, so the caches fill with shapes seen once, and token-bucketed batches have hundreds of shapes:
that is how bf16 training's resident memory grew, and fp32's once its products went through oneDNN too. What the
caps below cost and saved, as measured: docs/benchmarks.md, "Figures behind the code's choices", this module.
"""

from __future__ import annotations

import os

# Training (ideep, oneDNN): less memory at the same speed; ideep's below 64 no longer holds one update's ~30
# product shapes and was slower (docs/benchmarks.md, "Figures behind the code's choices": this module).
TRAINING_KERNEL_CACHES = (64, 16)
# Decoding (ideep, oneDNN). A decoding step mostly reuses only its own few shapes: as fast with 16 as with more,
# in less memory (the same row).
DECODING_KERNEL_CACHES = (16, 16)


def cap_kernel_caches(ideep: int, onednn: int) -> None:
    """Keep at most `ideep` compiled oneDNN products in PyTorch's ideep LRU cache (LRU_CACHE_CAPACITY) and
    `onednn` in oneDNN's own (ONEDNN_PRIMITIVE_CACHE_CAPACITY), unless the environment already says;
    effective only before the process runs its first oneDNN product (both are read once)."""
    for name, capacity in (("LRU_CACHE_CAPACITY", ideep), ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", onednn)):
        os.environ.setdefault(name, str(capacity))
