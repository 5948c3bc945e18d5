"""How many compiled oneDNN products a process keeps: a process setting, made by an entry point before any runs.

oneDNN keeps up to 1,024 compiled primitives (with their scratch buffers), one set per product shape, and
PyTorch's ideep layer as many again in an LRU cache of its own. Each cached product is compiled for one
(rows, in, out) shape, and a decoding step's row count changes whenever sentences finish, a training batch's
with its tokens, so the caches fill with shapes seen once: on a Zen 4 EPYC 299 row counts of one layer held
165 MB (0.27 MB per shape in each cache; both capped at 64: 26 MB). Token-bucketed batches have hundreds of
shapes, which is how bf16 training's RSS grew by ~1 GiB (issue 9), and fp32's once its products went through
oneDNN too.
"""

from __future__ import annotations

import os

# Training (ideep, oneDNN). oneDNN's at 16 measured 460 MB less than 1024 for `small` in fp32 at the same speed
# (`bench/train_throughput.py --preset small`, 2-core AMD EPYC, Zen 5); ideep's at 64, 600 MB less than 1024 on
# a Zen 4 in fp32 through oneDNN (2,156-2,220 -> 1,568-1,584 MB, the recipe's Multi30k data), at the same speed
# (2,977 vs 2,975 target tokens/s; 32: 1,497 MB, ~6% slower, since one update's ~30 product shapes no longer fit).
TRAINING_KERNEL_CACHES = (64, 16)
# Decoding (ideep, oneDNN). A decoding step mostly reuses only its own few shapes: on a 2-core Zen 4 EPYC the
# Multi30k test set decoded as fast with 16 as with 64, 256 or 1,024 (two A/Bs of three rounds,
# `bench/decode_ab.py`) in less memory: peak RSS 524-587 MiB against 622-645 with 64 and 705 with 1,024.
DECODING_KERNEL_CACHES = (16, 16)


def cap_kernel_caches(ideep: int, onednn: int) -> None:
    """Keep at most `ideep` compiled oneDNN products in PyTorch's ideep LRU cache (LRU_CACHE_CAPACITY) and
    `onednn` in oneDNN's own (ONEDNN_PRIMITIVE_CACHE_CAPACITY), unless the environment already says;
    effective only before the process runs its first oneDNN product (both are read once)."""
    for name, capacity in (("LRU_CACHE_CAPACITY", ideep), ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", onednn)):
        os.environ.setdefault(name, str(capacity))
