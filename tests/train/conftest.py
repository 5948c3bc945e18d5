"""Fixtures of the training tests: the real Multi30k binarized, and a tiny run that leaves every record."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.corpora import build_data_dir, read_gz
from tests.support.spm import BYTE_PIECES
from tests.support.training import data_with_records, train_recorded


@pytest.fixture(scope="session")
def multi30k_data(tmp_path_factory, multi30k_full) -> Path:
    """Real Multi30k (train: all 29,000 pairs; valid: 1,014), joint BPE of 2,000 pieces and characters."""
    m30k = multi30k_full
    splits = {
        "train": (read_gz(m30k / "train.en.gz"), read_gz(m30k / "train.de.gz")),
        "valid": (read_gz(m30k / "val.en.gz"), read_gz(m30k / "val.de.gz")),
        "test": (read_gz(m30k / "test_2016_flickr.en.gz"), read_gz(m30k / "test_2016_flickr.de.gz")),
    }
    return build_data_dir(tmp_path_factory.mktemp("multi30k"), splits, vocab_size=2000 + BYTE_PIECES)


@pytest.fixture(scope="module")
def trained_run(toy_data, tmp_path_factory) -> Path:
    """A 6-update tiny run with validation BLEU, TensorBoard and checkpoints at 3 and 6."""
    out = tmp_path_factory.mktemp("records")
    train_recorded(data_with_records(toy_data, out), out / "run", 6)
    return out / "run"
