"""Temperature sampling of language pairs (mtkit/data/pair_sampling.py): shares, draws, the batch plan."""

from __future__ import annotations

import numpy as np
import pytest

from mtkit.data.pair_sampling import pair_counts, pair_plan, sampled_indices, temperature_shares


def test_shares_go_from_by_size_at_t1_to_even_as_t_grows():
    sizes = [9000, 900, 100]
    assert temperature_shares(sizes, 1.0) == pytest.approx([0.9, 0.09, 0.01])
    t5 = temperature_shares(sizes, 5.0)
    expected = np.array([0.9, 0.09, 0.01]) ** 0.2
    assert t5 == pytest.approx(expected / expected.sum())
    assert t5[2] > 0.01 * 10 and t5[0] < 0.9  # the small pair gains more than tenfold, the large one gives up
    assert temperature_shares(sizes, 1e9) == pytest.approx([1 / 3] * 3)
    assert temperature_shares([5, 0], 5.0) == pytest.approx([1.0, 0.0])


def test_an_epoch_keeps_its_size_and_each_pair_its_share_within_its_own_lines():
    ranges = [(0, 9000), (9000, 9900), (9900, 10000)]
    chosen = sampled_indices(ranges, 5.0, seed=1)
    shares = temperature_shares([9000, 900, 100], 5.0)
    counts = [int(((chosen >= a) & (chosen < b)).sum()) for a, b in ranges]
    assert abs(len(chosen) - 10000) <= len(ranges)  # rounding only
    assert counts == [int(round(10000 * s)) for s in shares]
    big = chosen[chosen < 9000]
    assert len(np.unique(big)) == len(big)  # fewer than it has: drawn without replacement
    small = chosen[chosen >= 9900]
    assert set(small.tolist()) == set(range(9900, 10000))  # more than it has: every line, then again
    assert np.array_equal(chosen, sampled_indices(ranges, 5.0, seed=1))  # the seed decides
    assert not np.array_equal(chosen, sampled_indices(ranges, 5.0, seed=2))


def test_the_plan_packs_the_sampled_sentences_and_mixes_the_pairs():
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(1, 30, 3000), rng.integers(1, 30, 3000)
    ranges = [(0, 2000), (2000, 2900), (2900, 3000)]
    plan = pair_plan(src, tgt, ranges, 5.0, max_tokens=256, seed=3)
    every = np.sort(np.concatenate(plan.batches))
    assert np.array_equal(every, sampled_indices(ranges, 5.0, seed=3))
    for batch in plan.batches:
        assert len(batch) * (max(src[batch].max(), tgt[batch].max()) + 1) <= 256
    assert pair_counts(plan, ranges) == [int(((every >= a) & (every < b)).sum()) for a, b in ranges]
    mixed = sum(len({int(np.searchsorted([2000, 2900], i, side="right")) for i in b}) > 1 for b in plan.batches)
    assert mixed > len(plan.batches) // 2  # batches are packed by length across the pairs


@pytest.mark.parametrize("buckets", [None, np.array([8, 16, 32, 64])])
def test_one_pair_is_the_plain_plan_of_every_sentence(buckets):
    """A bilingual directory is a mix of one pair (mtkit/train/plan.py): its plan must be the plain one, batch for
    batch, whatever the temperature, so that training on it is bitwise what it was before pairs existed."""
    from mtkit.data.batching import plan_batches

    rng = np.random.default_rng(3)
    src, tgt = rng.integers(1, 40, 500), rng.integers(1, 40, 500)
    plain = plan_batches(src, tgt, 256, 7, 64, buckets)
    for temperature in (1.0, 5.0, 100.0):
        mixed = pair_plan(src, tgt, [(0, 500)], temperature, 256, 7, 64, buckets)
        assert len(mixed.batches) == len(plain.batches)
        assert all(np.array_equal(a, b) for a, b in zip(mixed.batches, plain.batches))
        assert np.array_equal(mixed.tgt_tokens, plain.tgt_tokens)
