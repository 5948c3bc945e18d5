"""The bench/ scripts' building blocks: a bench that stopped working goes unnoticed until its figures are needed."""

from __future__ import annotations

from pathlib import Path

from recipe_tools import load_script

from mtkit.data.dataset import open_data


def test_train_throughputs_synthetic_corpus_is_data_that_training_reads(tmp_path: Path) -> None:
    data = open_data(load_script("bench/train_throughput.py").make_corpus(tmp_path / "data", 50, 1000, seed=1))
    assert data.vocab_size == 1000 and (data.src_lang, data.tgt_lang) == ("en", "de")
    train, valid = data.split("train"), data.split("valid")
    assert (len(train), len(valid)) == (50, 64)
    assert train.max_id() < 1000 and train.src_sizes.min() >= 1 and 10 < train.src_sizes.mean() < 50
