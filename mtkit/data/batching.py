"""Token-bucketed batches (section 5.1: "sentence pairs were batched together by approximate sequence length").

The plan is made once, as fairseq does: sentences sorted by (target length, source length)
with ties shuffled by seed, then packed greedily so that sentences x longest length stays
within `max_tokens` on each side, counting BOS/EOS and padding. Every epoch shuffles the
order of the batches (not their contents) by (seed, epoch) and deals them to the ranks.

With `buckets` (a compiled step, mtkit/train/compile.py) the plan is bucketed instead: each
sentence pair goes to the shortest bucket length L that holds its longer side, both sides of a
batch are padded to L, and every batch of a bucket has max_tokens // L rows (its last one filled
with empty pairs, mtkit/data/buckets.py). An epoch then has one batch shape per bucket
(`shape_count`) rather than hundreds, and a compiled step or a CUDA graph serves many batches.
`LADDER` lengths grow by about 2^(1/4): on Multi30k (29k pairs, max-tokens 2,048 / 4,096) they make
12 shapes at a padding efficiency of 0.861 / 0.841, where multiples of 8 made 7 shapes at 0.762 /
0.754, multiples of 4 13 at 0.838 / 0.816, and unbucketed batches 178 / 115 shapes at 0.963 / 0.934.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchPlan:
    """Sentence indices of every batch, in length order, and each batch's token counts.

    Token counts include BOS/EOS (one per sentence and side); `*_padded` is sentences x the
    longest. Knowing them up front lets every rank compute an update's total target tokens
    without talking to the others. `skipped` sentences fit no batch.
    """

    batches: tuple[np.ndarray, ...]
    src_tokens: np.ndarray
    tgt_tokens: np.ndarray
    src_padded: np.ndarray
    tgt_padded: np.ndarray
    skipped: int
    max_tokens: int
    seed: int
    lengths: np.ndarray | None = None  # bucketed: each batch's L (it is max_tokens // L rows of L on both sides)

    def __len__(self) -> int:
        return len(self.batches)


def plan_batches(
    src_sizes: np.ndarray,
    tgt_sizes: np.ndarray,
    max_tokens: int,
    seed: int,
    max_positions: int | None = None,
    buckets: np.ndarray | None = None,
) -> BatchPlan:
    """Sort by length and pack; a sentence too long for `max_tokens` or `max_positions` is skipped.

    `buckets`: bucket lengths (`bucket_lengths`): a bucketed plan instead (the module docstring says why).

    Sizes are token counts without BOS/EOS; each side of the model sees one more token.
    fairseq stops with an error on such a sentence unless `--skip-invalid-size-inputs-valid-test`
    is given, and then skips it with one warning that counts them; mtkit always does the latter.
    """
    src_len = np.asarray(src_sizes, dtype=np.int64) + 1  # + EOS
    tgt_len = np.asarray(tgt_sizes, dtype=np.int64) + 1  # + BOS (decoder input) or + EOS (target)
    longest = np.maximum(src_len, tgt_len)
    limit = max_tokens if max_positions is None else min(max_tokens, max_positions)
    keep = longest <= limit
    skipped = int((~keep).sum())
    if skipped:
        first = np.flatnonzero(~keep)[:5].tolist()
        logger.warning(
            "%d sentence pair(s) longer than %d tokens (max_tokens %d, max_positions %s) are skipped; first ones: %s",
            skipped,
            limit,
            max_tokens,
            max_positions,
            first,
        )
    tiebreak = np.random.default_rng(seed).permutation(len(longest))
    order = np.lexsort((tiebreak, src_len, tgt_len))  # last key is the primary one
    order = order[keep[order]]
    if buckets is not None:
        return _plan_buckets(order, src_len, tgt_len, max_tokens, skipped, seed, buckets)
    # Greedy packing needs the running maximum, which resets at every batch: a plain loop over
    # Python ints (about 1 s per 4.5 M sentences), the one place where numpy cannot help.
    bounds, start, width = [], 0, 0
    for i, n in enumerate(longest[order].tolist()):
        width_if_added = n if n > width else width
        if (i - start + 1) * width_if_added > max_tokens:
            bounds.append(i)
            start, width = i, n
        else:
            width = width_if_added
    if not len(order):
        empty = np.zeros(0, dtype=np.int64)
        return BatchPlan((), empty, empty, empty, empty, skipped, max_tokens, seed)
    starts = np.asarray([0, *bounds], dtype=np.int64)
    counts = np.diff(np.append(starts, len(order)))
    src_sorted, tgt_sorted = src_len[order], tgt_len[order]
    return BatchPlan(
        tuple(np.split(order, bounds)),
        np.add.reduceat(src_sorted, starts),
        np.add.reduceat(tgt_sorted, starts),
        counts * np.maximum.reduceat(src_sorted, starts),
        counts * np.maximum.reduceat(tgt_sorted, starts),
        skipped,
        max_tokens,
        seed,
    )


def bucket_lengths(kind: str, limit: int) -> np.ndarray:
    """The bucket lengths up to `limit` (max_tokens or max_positions, always the last one): "ladder" or "x8"."""
    if kind == "x8":
        lengths = set(range(8, limit, 8))
    elif kind == "ladder":  # 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, ...
        steps = (8 * 2 ** (k / 4) for k in range(64))
        lengths = {int(-(-x // (2 if x < 32 else 8)) * (2 if x < 32 else 8)) for x in steps}
    else:
        raise ValueError(f"unknown bucket kind {kind!r}")
    return np.asarray(sorted({n for n in lengths if n < limit} | {limit}), dtype=np.int64)


def bucket_length(longest: np.ndarray | int, buckets: np.ndarray) -> np.ndarray:
    """The padded length of a batch whose longer side has `longest` tokens (BOS/EOS included): the shortest
    bucket that holds it (the last, the limit, for anything longer; the plan skips such pairs)."""
    index = np.searchsorted(buckets, np.asarray(longest, dtype=np.int64))
    return np.asarray(buckets[np.minimum(index, len(buckets) - 1)])


def bucket_rows(length: np.ndarray | int, max_tokens: int) -> np.ndarray:
    """Rows of every batch of a bucket: as many sentences of `length` as fit in `max_tokens`."""
    return np.maximum(max_tokens // np.asarray(length, dtype=np.int64), 1)


def _plan_buckets(
    order: np.ndarray,
    src_len: np.ndarray,
    tgt_len: np.ndarray,
    max_tokens: int,
    skipped: int,
    seed: int,
    buckets: np.ndarray,
) -> BatchPlan:
    """`order` (kept sentences sorted by target then source length) cut into batches of one bucket each."""
    length = bucket_length(np.maximum(src_len, tgt_len)[order], buckets)
    order, length = order[np.argsort(length, kind="stable")], np.sort(length, kind="stable")
    batches: list[np.ndarray] = []
    widths: list[int] = []
    for value in np.unique(length).tolist():
        members = order[length == value]
        rows = int(bucket_rows(value, max_tokens))
        for lo in range(0, len(members), rows):
            batches.append(members[lo : lo + rows])
            widths.append(value)
    width = np.asarray(widths, dtype=np.int64)
    padded = bucket_rows(width, max_tokens) * width  # the empty pairs that fill a bucket's last batch count too
    return BatchPlan(
        tuple(batches),
        np.asarray([int(src_len[b].sum()) for b in batches], dtype=np.int64),
        np.asarray([int(tgt_len[b].sum()) for b in batches], dtype=np.int64),
        padded,
        padded.copy(),
        skipped,
        max_tokens,
        seed,
        width,
    )


def shape_count(plan: BatchPlan) -> int:
    """Distinct batch shapes (rows, source length, target length) in the plan: a compiled step's graphs."""
    if plan.lengths is not None:
        return len(np.unique(plan.lengths))  # bucketed: L decides the rows too
    rows = np.maximum(np.asarray([len(b) for b in plan.batches], dtype=np.int64), 1)
    return len(set(zip(rows.tolist(), (plan.src_padded // rows).tolist(), (plan.tgt_padded // rows).tolist())))


def epoch_order(plan: BatchPlan, epoch: int, world_size: int = 1, shuffle: bool = True) -> np.ndarray:
    """Plan indices of one epoch as (batches per rank, world_size): row j holds every rank's j-th batch.

    The order is a permutation by (seed, epoch) and does not depend on the world size, and
    rank r takes column r, so W ranks with update-freq K see the same updates as one process
    with update-freq W x K. Every rank gets the same number of batches, so DDP never waits
    on a rank that ran out: the remainder (fewer than `world_size` batches) is dropped for
    that epoch only. The shuffle differs every epoch, so no sentence is left out for good;
    padding with repeated batches (fairseq's choice) would count some sentences twice instead.
    """
    order = np.random.default_rng((plan.seed, epoch)).permutation(len(plan)) if shuffle else np.arange(len(plan))
    per_rank = len(order) // world_size
    return order[: per_rank * world_size].reshape(per_rank, world_size)


def epoch_batches(
    plan: BatchPlan, epoch: int, rank: int = 0, world_size: int = 1, shuffle: bool = True
) -> list[np.ndarray]:
    """This rank's batches (sentence indices) for one epoch: column `rank` of `epoch_order`."""
    return [plan.batches[i] for i in epoch_order(plan, epoch, world_size, shuffle)[:, rank]]


def shard_all(plan: BatchPlan, rank: int = 0, world_size: int = 1) -> list[np.ndarray]:
    """Every batch exactly once across ranks (counts may differ by one): for validation, where nothing is dropped."""
    return list(plan.batches[rank::world_size])


def padding_efficiency(plan: BatchPlan) -> tuple[float, float, float]:
    """Real / padded tokens on the source side, the target side, and both together (BOS/EOS count as real)."""
    real_src, real_tgt = int(plan.src_tokens.sum()), int(plan.tgt_tokens.sum())
    pad_src, pad_tgt = int(plan.src_padded.sum()), int(plan.tgt_padded.sum())
    return real_src / max(pad_src, 1), real_tgt / max(pad_tgt, 1), (real_src + real_tgt) / max(pad_src + pad_tgt, 1)
