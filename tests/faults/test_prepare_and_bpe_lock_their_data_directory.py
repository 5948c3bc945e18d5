"""One `prepare` or `bpe` at a time on a data directory: a second is refused at once, in one sentence.

Each holds DIR/.mtkit.lock (an flock) for its whole run, so two runs never sweep each other's
temporaries or mix their raw/ sides; and no temporary name is shared by two writers.
"""

from __future__ import annotations

import os
import socket

import numpy as np

from mtkit.data.binarize import BinaryWriter, IndexedDataset
from mtkit.files import DATA_LOCK, data_dir_locked
from tests.support.cli import error_line
from tests.support.corpora import prepare_custom, text_files


def _listing(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_second_prepare_on_a_directory_in_use_is_refused(cli, tmp_path) -> None:
    """fault: prepare on a data directory another prepare holds; expected: exit 1 at once naming it, nothing written."""
    files, out = text_files(tmp_path), tmp_path / "out"
    assert prepare_custom(files, out).returncode == 0
    before = _listing(out)
    with data_dir_locked(out, "mtkit prepare"):  # this test plays the first run
        line = error_line(prepare_custom(files, out, test=False))
        assert _listing(out) == {**before, DATA_LOCK: _listing(out)[DATA_LOCK]}  # nothing else changed
    assert f"is in use by `mtkit prepare` (pid {os.getpid()} on {socket.gethostname()})" in line
    assert _listing(out) == before  # and the lock file went with its holder


def test_bpe_on_a_directory_that_prepare_holds_is_refused(cli, tmp_path) -> None:
    """fault: bpe while a prepare holds the data directory; expected: exit 1 naming it, no spm.model or bin/."""
    files, out = text_files(tmp_path), tmp_path / "out"
    assert prepare_custom(files, out).returncode == 0
    before = _listing(out)
    with data_dir_locked(out, "mtkit prepare"):
        line = error_line(cli("bpe", out, "--vocab-size", "300"))
    assert "is in use by `mtkit prepare`" in line and _listing(out) == before
    done = cli("bpe", out, "--vocab-size", "300")  # the holder is gone: the lock went with it
    assert done.returncode == 0, done.stderr
    assert not (out / DATA_LOCK).exists()


def test_two_writers_of_one_array_never_share_a_temporary(tmp_path) -> None:
    """fault: two writers of bin/train.en at once, one aborted; expected: the other's array whole, no temporary left."""
    prefix = tmp_path / "train.en"
    first, second = BinaryWriter(prefix, 100), BinaryWriter(prefix, 100)
    first.add_many([[1, 2, 3], [4]])
    second.add_many([[9] * 50])
    second.abort()  # a fixed temporary name would have lost (or mixed into) the first writer's ids here
    first.close()
    data = IndexedDataset(prefix)
    assert [data[i].tolist() for i in range(len(data))] == [[1, 2, 3], [4]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.en.bin", "train.en.idx"]
    assert np.fromfile(tmp_path / "train.en.idx", dtype=np.int64).tolist() == [0, 3, 4]
