"""`mtkit train D` while `mtkit bpe D` (or `prepare`) holds D's lock names the writer instead of blaming its files.

train read D/bpe.json half-written and said "D/bpe.json is not valid ... rerun `mtkit bpe D`",
advice the lock then refuses. Now it sees the lock held and says who holds it.
"""

from __future__ import annotations

import os
import shutil

from mtkit.data.dataset import open_data
from mtkit.files import data_dir_locked
from tests.support.cli import run_cli


def test_train_while_bpe_holds_the_data_directory_names_bpe_and_its_pid(toy_data, tmp_path):
    """fault: `mtkit train D` while `mtkit bpe D --from MODEL` holds D's lock (bpe.json half-written); expected: one
    sentence "D is being written by `mtkit bpe` (pid N ...); wait for it", no advice to rerun bpe."""
    data = tmp_path / "data"
    shutil.copytree(toy_data, data)
    with data_dir_locked(data, "mtkit bpe"):
        (data / "bpe.json").write_text('{"src_lang": "de", ', encoding="utf-8")  # as bpe writes it
        done = run_cli("train", data, "--out", tmp_path / "run", "--preset", "tiny", "--device", "cpu")
    assert done.returncode == 1, done.stderr
    assert f"{data} is being written by `mtkit bpe` (pid {os.getpid()}" in done.stderr, done.stderr
    assert "wait for it" in done.stderr and "rerun" not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()


def test_a_data_directory_whose_writer_has_ended_is_read_as_usual(toy_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(toy_data, data)
    with data_dir_locked(data, "mtkit bpe"):
        pass
    (data / ".mtkit.lock").write_text("`mtkit bpe` (pid 1 on elsewhere)\n", encoding="utf-8")  # a lock nobody holds
    assert open_data(data).src_lang
