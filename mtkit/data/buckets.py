"""Batches padded to their bucket's shape (mtkit/data/batching.py plans them): rows and length fixed per bucket.

A compiled training step (mtkit/train/compile.py) specialises on its inputs' shapes, and a CUDA graph
replays one shape; padding every batch to (max_tokens // L rows, L positions) on both sides makes an
epoch's shapes the handful of bucket lengths. The padding changes no number: extra positions are PAD
(masked as keys, ignored by the loss), and a bucket's last batch is filled with empty pairs, a source of
EOS alone and a target of BOS in, nothing out: one real key each, so attention stays finite, and no
loss, so no gradient. Token counts stay the real ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mtkit.config import BOS, EOS, PAD
from mtkit.data.batching import bucket_length, bucket_lengths, bucket_rows
from mtkit.data.dataset import Batch, ParallelSplit


def pad_batch(batch: Batch, rows: int, length: int) -> Batch:
    """`batch` as `rows` x `length` on both sides (its own rows first, then empty pairs)."""
    filled = []
    for array, first in ((batch.src, EOS), (batch.tgt_in, BOS), (batch.tgt_out, None)):
        out = np.full((rows, length), PAD, dtype=array.dtype)
        out[: array.shape[0], : array.shape[1]] = array
        if first is not None:
            out[array.shape[0] :, 0] = first
        filled.append(out)
    return Batch(*filled, batch.src_tokens, batch.tgt_tokens)


class BucketedSplit:
    """A ParallelSplit whose batches come padded to their bucket's shape; sizes and the rest are the split's."""

    def __init__(self, split: ParallelSplit, buckets: np.ndarray, max_tokens: int):
        self.split, self.buckets, self.max_tokens = split, buckets, max_tokens

    def __getattr__(self, name: str) -> Any:
        return getattr(self.split, name)

    def __len__(self) -> int:
        return len(self.split)

    def collate(self, indices: np.ndarray) -> Batch:
        batch = self.split.collate(indices)
        length = int(bucket_length(max(batch.src.shape[1], batch.tgt_in.shape[1]), self.buckets))
        return pad_batch(batch, int(bucket_rows(length, self.max_tokens)), length)


def bucketed(splits: tuple[ParallelSplit, ...], kind: str, max_tokens: int, max_positions: int) -> Any:
    """Each split bucketed as mtkit/train/plan.py plans it (`kind`: ladder or x8, up to the token/position limits)."""
    buckets = bucket_lengths(kind, min(max_tokens, max_positions))
    return tuple(BucketedSplit(split, buckets, max_tokens) for split in splits)
