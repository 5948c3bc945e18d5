"""A model directory's config.json, vocab.json or source.spm that is a link to /dev/zero or a named pipe.

A cloned model repository can carry either: /dev/zero was read until memory ran out (a MemoryError
traceback under a limit), a pipe's open waited for ever. Now a model directory's small files are
read only when they are regular files, at most 64 MiB (mtkit/files.py `read_model_file`): one sentence.
"""

from __future__ import annotations

import os
import shutil

import pytest

from mtkit.errors import MtkitError
from mtkit.files import read_model_file
from tests.support.cli import run_cli

pytest.importorskip("transformers")


def _copy(opus_dir, tmp_path):
    damaged = tmp_path / "model"
    shutil.copytree(opus_dir, damaged)
    return damaged


@pytest.mark.parametrize("name", ["config.json", "vocab.json", "source.spm"])
def test_a_file_linked_to_dev_zero_is_one_sentence(opus_dir, tmp_path, name):
    """fault: a model directory whose config.json / vocab.json / source.spm is a link to /dev/zero; expected: one
    sentence naming the file, memory bounded."""
    model = _copy(opus_dir, tmp_path)
    (model / name).unlink()
    (model / name).symlink_to("/dev/zero")
    done = run_cli("translate", "-m", model, "--device", "cpu", input="a dog\n", process=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    assert f"{model / name} is a device, not a regular file" in done.stderr and "Traceback" not in done.stderr


def test_a_config_json_that_is_a_named_pipe_is_one_sentence_and_no_hang(opus_dir, tmp_path):
    """fault: a model directory whose config.json is a named pipe; expected: one sentence at once, no hang."""
    model = _copy(opus_dir, tmp_path)
    (model / "config.json").unlink()
    os.mkfifo(model / "config.json")
    done = run_cli("translate", "-m", model, "--device", "cpu", input="a dog\n", process=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "config.json is a named pipe, not a regular file" in done.stderr and "Traceback" not in done.stderr


def test_a_file_over_the_bound_is_refused_unread(tmp_path):
    big = tmp_path / "vocab.json"
    big.write_bytes(b" " * 1025)
    with pytest.raises(MtkitError, match="over 0 MiB"):
        read_model_file(big, limit=1024)
    assert read_model_file(big, limit=2048) == b" " * 1025
    (tmp_path / "link").symlink_to(big)  # a Hub cache's files are links to its blobs: followed
    assert len(read_model_file(tmp_path / "link")) == 1025
    with pytest.raises(FileNotFoundError):
        read_model_file(tmp_path / "missing.json")
