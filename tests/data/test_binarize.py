"""Binarized corpora: what goes in comes out, in O(1) per sentence, with the right id width."""

import numpy as np
import pytest

from mtkit.data.binarize import BinaryWriter, IndexedDataset
from mtkit.errors import MtkitError


def write(prefix, sentences, vocab_size):
    with BinaryWriter(prefix, vocab_size, buffer_tokens=4) as writer:  # tiny buffer: exercises flushing
        for ids in sentences:
            writer.add_many([ids])


@pytest.mark.parametrize(
    "vocab_size, dtype, itemsize", [(8000, np.uint16, 2), (65536, np.uint16, 2), (70000, np.int32, 4)]
)
def test_round_trip_with_the_narrowest_dtype(tmp_path, vocab_size, dtype, itemsize):
    sentences = [[5, 6, 7], [], [vocab_size - 1], list(range(4, 40))]
    write(tmp_path / "train.en", sentences, vocab_size)
    data = IndexedDataset(tmp_path / "train.en")
    assert data.dtype == dtype
    assert (tmp_path / "train.en.bin").stat().st_size == itemsize * sum(map(len, sentences))
    assert len(data) == 4 and data.num_tokens == sum(map(len, sentences))
    assert [data[i].tolist() for i in range(4)] == sentences
    assert data[-1].tolist() == sentences[-1]
    assert data.sizes.tolist() == [3, 0, 1, 36]
    with pytest.raises(IndexError):
        data[4]


def test_out_of_range_ids_are_refused_and_nothing_is_left_behind(tmp_path):
    with pytest.raises(MtkitError, match="out of range"):
        write(tmp_path / "x", [[1, 2], [9000]], 8000)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_missing_or_mismatched_files_are_clear_errors(tmp_path):
    with pytest.raises(MtkitError, match="run `mtkit bpe`"):
        IndexedDataset(tmp_path / "nothing")
    write(tmp_path / "a", [[1, 2, 3]], 8000)
    (tmp_path / "a.bin").write_bytes(b"\0" * 5)
    with pytest.raises(MtkitError, match="does not match"):
        IndexedDataset(tmp_path / "a")
