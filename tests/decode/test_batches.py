"""Batching helpers: chunks of the input, batches by token count (balanced for workers), results in input order."""

from __future__ import annotations

import itertools
import random

from mtkit.decode.batches import balanced_batches, chunks, in_order, pack_batches


def test_pack_batches_covers_every_sentence_once_within_the_budget():
    lengths = [5, 1, 9, 3, 3, 40, 7, 2, 8, 8]
    batches = pack_batches(lengths, batch_tokens=20)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(flat, reverse=True)
    for b in batches:
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 20
    assert [len(b) for b in pack_batches([3] * 10, batch_tokens=9)] == [3, 3, 3, 1]


def test_random_lengths_are_packed_once_each_and_only_a_single_long_sentence_exceeds_the_budget():
    rng = random.Random(7)
    for _ in range(50):
        lengths = [rng.randint(1, 60) for _ in range(rng.randint(0, 80))]
        budget, workers = rng.randint(1, 200), rng.randint(1, 4)
        for batches in (pack_batches(lengths, budget), balanced_batches(lengths, budget, workers)):
            assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
            assert all(b for b in batches)
            for b in batches:
                assert len(b) * max(lengths[i] for i in b) <= budget or (len(b) == 1 and lengths[b[0]] > budget)


def test_balanced_batches_give_each_worker_a_share_and_keep_every_sentence_within_the_budget():
    lengths = [3] * 10
    assert pack_batches(lengths, 9) == balanced_batches(lengths, 9, 1)  # one worker: the batches as they were
    assert len(pack_batches(lengths, 12)) == 3
    two = balanced_batches(lengths, 12, 2)
    assert len(two) == 4 and sorted(i for b in two for i in b) == list(range(10))
    assert all(len(b) * 3 <= 12 for b in two)
    assert len(balanced_batches(lengths, 9, 2)) == 4  # already a multiple: unchanged
    assert balanced_batches([7], 100, 2) == [[0]]  # one sentence cannot be split
    assert len(balanced_batches([3] * 5, 100, 3)) == 3  # one batch's worth, shared by three workers
    lengths = [5 + (7 * i) % 40 for i in range(1000)]  # 7 batches at 4,096: 8 for two workers
    batches = balanced_batches(lengths, 4096, 2)
    costs = [len(b) * max(lengths[i] for i in b) for b in batches]  # padded tokens
    assert len(batches) == 8 and min(costs) > 0.9 * max(costs)  # no last batch of a few sentences


def test_in_order_yields_each_result_once_as_soon_as_every_earlier_one_is_ready():
    arrived: list[int] = []

    def batches():
        for done in ({2: "c"}, {0: "a", 3: "d"}, {1: "b"}, {4: "e"}):
            arrived.append(min(done))
            yield done

    out = []
    for result in in_order(batches()):
        out.append((result, len(arrived)))
    # "a" comes with the second batch, not later; "b" releases "c" and "d" at once
    assert out == [("a", 2), ("b", 3), ("c", 3), ("d", 3), ("e", 4)]


def test_chunks_number_their_first_line_and_read_no_further_than_needed():
    read: list[int] = []

    def endless():
        for n in itertools.count(1):
            read.append(n)
            yield n

    stream = chunks(endless(), 3)
    assert next(stream) == (1, [1, 2, 3]) and len(read) == 3
    assert next(stream) == (4, [4, 5, 6])
    assert list(chunks(range(5), 2)) == [(1, [0, 1]), (3, [2, 3]), (5, [4])]
    assert list(chunks([], 2)) == []
