"""Bucketed batches: few shapes, every sentence once, and a padded batch computes what the unpadded one does."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mtkit.config import ModelConfig
from mtkit.data.batching import (
    bucket_length,
    bucket_lengths,
    bucket_rows,
    epoch_batches,
    padding_efficiency,
    plan_batches,
    shape_count,
)
from mtkit.data.buckets import bucketed, pad_batch
from mtkit.data.dataset import open_data
from mtkit.model import Transformer
from mtkit.train.loss import label_smoothed_sums
from tests.support.corpora import random_sizes, write_pairs


def test_the_ladder_grows_by_about_a_fourth_root_of_two_and_ends_at_the_limit() -> None:
    ladder = bucket_lengths("ladder", 200).tolist()
    assert ladder[:13] == [8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64]
    assert ladder[-1] == 200 and all(n % 8 == 0 for n in ladder[8:-1])
    assert all(1.0 < b / a <= 1.25 for a, b in zip(ladder, ladder[1:-1]))
    assert bucket_lengths("x8", 30).tolist() == [8, 16, 24, 30]
    assert bucket_length(np.array([1, 8, 9, 33, 500]), np.array([8, 16, 40])).tolist() == [8, 8, 16, 40, 40]


@pytest.mark.parametrize("kind", ["ladder", "x8"])
@pytest.mark.parametrize("max_tokens", [64, 300, 4096])
def test_a_bucketed_plan_has_one_shape_per_bucket_and_every_sentence_once(kind: str, max_tokens: int) -> None:
    src, tgt = random_sizes(3000, 0)
    buckets = bucket_lengths(kind, max_tokens)
    plan = plan_batches(src, tgt, max_tokens, seed=3, buckets=buckets)
    longest = np.maximum(src, tgt) + 1
    kept = np.flatnonzero(longest <= max_tokens)
    assert plan.skipped == len(src) - len(kept)
    assert np.array_equal(np.sort(np.concatenate(epoch_batches(plan, epoch=2))), kept)
    assert plan.lengths is not None
    for batch, length in zip(plan.batches, plan.lengths.tolist()):
        assert length in buckets
        assert longest[batch].max() <= length  # every pair fits its bucket
        assert len(batch) <= bucket_rows(length, max_tokens) and bucket_rows(length, max_tokens) * length <= max(
            max_tokens, length
        )
    assert shape_count(plan) == len(set(plan.lengths.tolist())) <= len(buckets)
    assert plan.src_padded.tolist() == [int(bucket_rows(n, max_tokens)) * n for n in plan.lengths.tolist()]
    assert 0 < padding_efficiency(plan)[2] <= 1


def test_an_unbucketed_plan_counts_its_distinct_shapes() -> None:
    src, tgt = random_sizes(500, 1)
    plan = plan_batches(src, tgt, 300, seed=0)
    shapes = {(len(b), src[b].max() + 1, tgt[b].max() + 1) for b in plan.batches}
    assert shape_count(plan) == len(shapes)


def test_a_bucketed_batch_gives_the_loss_and_gradients_of_the_unpadded_one(tmp_path) -> None:
    """Extra PAD columns and empty rows change no number: padding is masked, empty pairs have no target."""
    pairs = [([5, 6, 7], [8, 9]), ([10], [11, 12, 13, 14]), ([15, 16], [17])]
    write_pairs(tmp_path, pairs)
    split = open_data(tmp_path).split("train")
    (padded_split,) = bucketed((split,), "ladder", 64, 1024)
    indices = np.arange(3)
    plain, padded = split.collate(indices), padded_split.collate(indices)
    assert padded.src.shape == padded.tgt_in.shape == (8, 8)  # bucket 8: 64 // 8 rows
    assert (padded.src_tokens, padded.tgt_tokens) == (plain.src_tokens, plain.tgt_tokens)
    assert pad_batch(plain, 5, 12).tgt_out[3:].max() == 0  # empty pairs: nothing to predict
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=50, d_model=32, d_ff=64, heads=4, encoder_layers=2, decoder_layers=2))
    results = []
    for batch in (plain, padded):
        model.zero_grad()
        src, tgt_in, tgt_out = (torch.from_numpy(a) for a in (batch.src, batch.tgt_in, batch.tgt_out))
        model.eval()  # no dropout: the masks would be drawn for another shape
        with torch.enable_grad():
            loss, nll = label_smoothed_sums(model(src, tgt_in), tgt_out, 0.1)
            loss.backward()
        results.append((loss.detach(), nll, [p.grad.clone() for p in model.parameters()]))
    (loss_a, nll_a, grads_a), (loss_b, nll_b, grads_b) = results
    torch.testing.assert_close(loss_b, loss_a, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(nll_b, nll_a, rtol=1e-5, atol=1e-5)
    for a, b in zip(grads_a, grads_b):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
