"""Fixtures of the decoding tests: checkpoints made without training, which decoding does not need.

A tiny SentencePiece BPE model is learned on a few hundred Multi30k lines (the shipped sample), and randomly
initialised (seeded) tiny Transformers are saved the way training saves them (tests/support/models.py).
"""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path

import pytest

from tests.support.models import random_model, save_run
from tests.support.spm import BYTE_PIECES, pieces, train_spm


@pytest.fixture
def make_model():
    """`make_model(vocab_size, seed, **overrides)`: a seeded random tiny Transformer."""
    return random_model


@pytest.fixture(scope="session")
def multi30k_lines(multi30k) -> dict[str, list[str]]:
    """The first lines of Multi30k train and test, both languages."""
    out = {}
    for name in ("train.en", "train.de", "test_2016_flickr.en", "test_2016_flickr.de"):
        with gzip.open(multi30k / f"{name}.gz", "rt", encoding="utf-8") as f:
            out[name] = [line.rstrip("\n") for line in itertools.islice(f, 400)]
    return out


@pytest.fixture(scope="session")
def spm_bytes(multi30k_lines) -> bytes:
    return train_spm(multi30k_lines["train.en"] + multi30k_lines["train.de"], vocab_size=300 + BYTE_PIECES)


@pytest.fixture(scope="session")
def model_file(tmp_path_factory, spm_bytes) -> Path:
    """A kind "checkpoint" file of a random tiny model with 32 positions (so long lines are easy to make)."""
    run = tmp_path_factory.mktemp("run")
    model = random_model(pieces(spm_bytes), seed=1, max_positions=32)
    return save_run(run, spm_bytes, {100: model})[-1]
