"""Lines into chunks, a chunk's sentences into batches by token count, and results back into input order.

Pure functions of lengths and indices, with no model in sight: the Translator reads its input a chunk at a time,
packs each chunk's sentences by length (`pack_batches`, or `balanced_batches` for several workers), and yields
the results in input order however the batches finish (`in_order`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def chunks(items: Iterable[T], size: int) -> Iterator[tuple[int, list[T]]]:
    """`items`, `size` at a time, each chunk with the number of its first item (from 1), read only as needed:
    the first chunk of an endless stream comes before its end is read."""
    items = iter(items)
    first = 1
    while chunk := list(itertools.islice(items, size)):
        yield first, chunk
        first += len(chunk)


def in_order(batches: Iterable[dict[int, T]]) -> Iterator[T]:
    """Results that arrive batch by batch ({index: result}), yielded in index order as soon as each is ready."""
    ready: dict[int, T] = {}
    next_out = 0
    for done in batches:
        ready.update(done)
        while next_out in ready:
            yield ready.pop(next_out)
            next_out += 1


def pack_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Indices, longest first, in batches whose size x longest length stays within `batch_tokens`.

    Longest first: a batch that does not fit in memory fails at once, not at the end. A
    sentence longer than `batch_tokens` on its own still gets a batch of one.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= batch_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def balanced_batches(lengths: Sequence[int], batch_tokens: int, workers: int) -> list[list[int]]:
    """`pack_batches` with a multiple of `workers` batches (where the sentences allow), all about equally full.

    Batches of one budget cost about the same, so with 5 batches for 2 workers the fifth would run alone and
    leave a worker idle. The budget is the smallest that still packs the sentences into the next multiple
    of `workers` batches (a larger one would leave the last batch nearly empty).
    """
    batches = pack_batches(lengths, batch_tokens)
    target = math.ceil(len(batches) / workers) * workers
    if workers == 1 or len(batches) == target:
        return batches
    low, high = 1, batch_tokens  # pack_batches(high) fits in `target` batches; find the least budget that does
    while low < high:
        middle = (low + high) // 2
        if len(pack_batches(lengths, middle)) <= target:
            high = middle
        else:
            low = middle + 1
    return pack_batches(lengths, high)
