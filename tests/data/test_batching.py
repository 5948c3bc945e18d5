"""Token-bucketed batches: invariants of the plan, the epoch shuffle, the rank shares, and collation."""

from __future__ import annotations

import numpy as np
import pytest

from mtkit.config import BOS, EOS, PAD
from mtkit.data.batching import epoch_batches, epoch_order, padding_efficiency, plan_batches, shard_all
from mtkit.data.dataset import open_data
from mtkit.errors import MtkitError
from tests.support.corpora import random_sizes, write_pairs


@pytest.mark.parametrize("max_tokens", [64, 300, 4096])
def test_every_sentence_once_and_no_batch_over_max_tokens(max_tokens: int) -> None:
    src, tgt = random_sizes(3000, 0)
    plan = plan_batches(src, tgt, max_tokens, seed=3)
    longest = np.maximum(src, tgt) + 1
    kept = np.flatnonzero(longest <= max_tokens)
    assert plan.skipped == len(src) - len(kept)
    seen = np.concatenate(epoch_batches(plan, epoch=5))
    assert np.array_equal(np.sort(seen), kept)  # each kept sentence exactly once per epoch
    for b in plan.batches:
        assert len(b) * (src[b].max() + 1) <= max_tokens  # source side: sentences x (longest + EOS)
        assert len(b) * (tgt[b].max() + 1) <= max_tokens  # target side: sentences x (longest + BOS/EOS)
    assert plan.src_padded.tolist() == [len(b) * (src[b].max() + 1) for b in plan.batches]
    assert plan.tgt_tokens.tolist() == [int((tgt[b] + 1).sum()) for b in plan.batches]


def test_batches_are_sorted_by_target_then_source_and_packed_greedily() -> None:
    src, tgt = random_sizes(2000, 1)
    plan = plan_batches(src, tgt, 500, seed=0)
    order = np.concatenate(plan.batches)
    keys = list(zip(tgt[order], src[order]))
    assert keys == sorted(keys)
    for a, b in zip(plan.batches, plan.batches[1:]):  # adding the next sentence would have overflowed
        width = max(np.maximum(src[a], tgt[a]).max(), max(src[b[0]], tgt[b[0]])) + 1
        assert (len(a) + 1) * width > 500


def test_ties_are_shuffled_by_seed_and_epochs_by_seed_and_epoch() -> None:
    src = np.full(400, 5)
    tgt = np.full(400, 5)
    a, b = plan_batches(src, tgt, 60, seed=1), plan_batches(src, tgt, 60, seed=2)
    assert not np.array_equal(np.concatenate(a.batches), np.concatenate(b.batches))
    again = plan_batches(src, tgt, 60, seed=1)
    assert all(np.array_equal(x, y) for x, y in zip(a.batches, again.batches))
    first, second = epoch_order(a, 0).ravel(), epoch_order(a, 1).ravel()
    assert sorted(first) == sorted(second) and not np.array_equal(first, second)
    assert np.array_equal(epoch_order(a, 1), epoch_order(again, 1))


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_ranks_get_disjoint_equal_shares_that_follow_the_single_process_order(world_size: int) -> None:
    src, tgt = random_sizes(1500, 2)
    plan = plan_batches(src, tgt, 200, seed=4)
    shares = [epoch_batches(plan, 7, rank, world_size) for rank in range(world_size)]
    assert len({len(s) for s in shares}) == 1
    assert len(shares[0]) == len(plan) // world_size  # the remainder (< world_size batches) is dropped
    ids = [id_ for s in shares for b in s for id_ in b.tolist()]
    assert len(ids) == len(set(ids))  # disjoint
    single = epoch_batches(plan, 7)
    for j in range(len(shares[0])):  # update j of W ranks = batches j*W .. j*W+W-1 of one process
        for rank in range(world_size):
            assert np.array_equal(shares[rank][j], single[j * world_size + rank])


def test_validation_shards_cover_everything() -> None:
    src, tgt = random_sizes(500, 3)
    plan = plan_batches(src, tgt, 300, seed=0)
    ids = np.concatenate([b for rank in range(3) for b in shard_all(plan, rank, 3)])
    assert np.array_equal(np.sort(ids), np.arange(500))


def test_too_long_sentences_are_skipped_and_counted(caplog) -> None:
    src, tgt = np.array([3, 300, 4, 10]), np.array([3, 5, 600, 10])
    plan = plan_batches(src, tgt, 1000, seed=0, max_positions=256)
    assert plan.skipped == 2
    assert sorted(np.concatenate(plan.batches).tolist()) == [0, 3]
    assert "2 sentence pair(s) longer than 256 tokens" in caplog.text


def test_padding_efficiency_is_real_over_padded() -> None:
    plan = plan_batches(np.array([1, 3]), np.array([2, 2]), 100, seed=0)
    src_eff, tgt_eff, both = padding_efficiency(plan)
    assert (src_eff, tgt_eff) == (6 / 8, 1.0)  # src 2+4 real in 2x4; tgt 3+3 in 2x3
    assert both == pytest.approx(12 / 14)


def test_collate_adds_bos_eos_and_right_padding(tmp_path) -> None:
    write_pairs(tmp_path, [([10, 11, 12], [20]), ([13], [21, 22, 23, 24]), ([], [25])])
    split = open_data(tmp_path).split("train")
    batch = split.collate(np.array([1, 0, 2]))
    assert batch.src.tolist() == [[13, EOS, PAD, PAD], [10, 11, 12, EOS], [EOS, PAD, PAD, PAD]]
    assert batch.tgt_in.tolist() == [[BOS, 21, 22, 23, 24], [BOS, 20, PAD, PAD, PAD], [BOS, 25, PAD, PAD, PAD]]
    assert batch.tgt_out.tolist() == [[21, 22, 23, 24, EOS], [20, EOS, PAD, PAD, PAD], [25, EOS, PAD, PAD, PAD]]
    assert (batch.src_tokens, batch.tgt_tokens) == (7, 9)
    assert batch.src.dtype == np.int64


def test_data_dir_without_binarized_data_is_one_clear_error(tmp_path) -> None:
    with pytest.raises(MtkitError, match="run `mtkit bpe"):
        open_data(tmp_path)
    write_pairs(tmp_path / "d", [([1], [2])])
    with pytest.raises(MtkitError, match="valid.en.bin is missing"):
        open_data(tmp_path / "d").split("valid")
