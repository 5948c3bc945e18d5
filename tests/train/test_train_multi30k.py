"""End to end on real data: the `tiny` preset learns Multi30k well beyond a unigram model in under a minute."""

from __future__ import annotations

import numpy as np
import pytest

from mtkit.config import EOS
from mtkit.data.dataset import open_data
from tests.support import metrics
from tests.support.cli import run_cli


def unigram_cross_entropy(data_dir) -> float:
    """Nats per target token (EOS included) of the training set's unigram distribution on the valid targets."""
    data = open_data(data_dir)
    train, valid = data.split("train"), data.split("valid")
    counts = np.bincount(np.asarray(train.tgt.ids, dtype=np.int64), minlength=data.vocab_size).astype(np.float64)
    counts[EOS] += len(train)
    probs = (counts + 1.0) / (counts.sum() + data.vocab_size)  # add-one: no valid token has probability 0
    valid_ids = np.concatenate([np.asarray(valid.tgt.ids, dtype=np.int64), np.full(len(valid), EOS)])
    return float(-np.log(probs[valid_ids]).mean())


@pytest.mark.slow
@pytest.mark.integration
def test_tiny_model_beats_the_unigram_baseline_on_multi30k(multi30k_data, tmp_path) -> None:
    run = tmp_path / "run"
    done = run_cli(
        "train",
        multi30k_data,
        "--out",
        run,
        "--preset",
        "tiny",
        "--max-steps",
        "300",
        "--valid-every",
        "150",
        "--log-every",
        "50",
        "--device",
        "cpu",
        "--threads",
        "1",
    )
    assert done.returncode == 0, done.stderr
    records = metrics.records(run)
    valid = [r for r in records if r["event"] == "valid"]
    assert [r["step"] for r in valid] == [150, 300]
    baseline = unigram_cross_entropy(multi30k_data)
    assert baseline > 4.5  # sanity: a 2,000-piece vocabulary is far from trivial to predict
    assert valid[-1]["nll"] < baseline - 1.0, (valid, baseline)  # at least e (2.7x) lower perplexity
    assert valid[-1]["nll"] < valid[0]["nll"]
    assert (run / "checkpoint_best.pt").is_file() and (run / "checkpoint_last.pt").is_file()
    start = next(r for r in records if r["event"] == "data")
    assert start["pad_eff"] > 0.9  # token-bucketed batches waste under 10% on padding
