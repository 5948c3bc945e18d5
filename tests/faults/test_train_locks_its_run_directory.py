"""Two `mtkit train` on the same --out (a requeued job): the second exits at once, naming the first."""

from __future__ import annotations

import os
import socket

from mtkit.train import rundir
from tests.support.cli import run_cli
from tests.support.training import FAST


def test_a_second_train_on_a_locked_run_directory_names_the_first(toy_data, tmp_path) -> None:
    """fault: a second train on a run directory in use; expected: exit 1 at once, one sentence with pid and host."""
    run = tmp_path / "run"
    run.mkdir()
    with rundir.locked(run):  # this test process plays the running training
        second = run_cli("train", toy_data, "--out", run, *FAST, "--max-steps", "2")
    assert second.returncode == 1 and "Traceback" not in second.stderr
    assert f"in use by another `mtkit train` (pid {os.getpid()} on {socket.gethostname()})" in second.stderr
    assert sorted(p.name for p in run.iterdir()) == [".train.lock"]  # it wrote nothing
    after = run_cli("train", toy_data, "--out", run, *FAST, "--max-steps", "1")  # the kernel dropped the lock
    assert after.returncode == 0, after.stderr


def test_out_naming_a_file_is_one_sentence(toy_data, tmp_path) -> None:
    """fault: train --out FILE; expected: exit 1, one sentence, the file untouched."""
    target = tmp_path / "notes.txt"
    target.write_text("mine\n")
    result = run_cli("train", toy_data, "--out", target, *FAST, "--max-steps", "1")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "is a file, not a run directory" in result.stderr and target.read_text() == "mine\n"
