"""RUN/.train.lock is opened without following a link and never truncated; no lock support is no hang.

A symbolic link planted under its name in a shared run directory (pointing at someone's file)
is refused in one sentence and the target is left as it was. On a filesystem without flock
(some NFS, Lustre `noflock`: flock fails with ENOLCK) training goes on with one warning, the
documented fallback. Whatever goes wrong on rank 0 while it takes RUN, every rank ends with a
sentence: none waits forever for rank 0.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import subprocess
import sys

from mtkit.train import rundir
from tests.support.cli import ROOT, run_cli
from tests.support.training import FAST


def test_a_symlink_in_place_of_the_lock_is_refused_and_its_target_untouched(toy_data, tmp_path) -> None:
    """fault: .train.lock is a symlink to another file; expected: exit 1, one sentence, the target unchanged."""
    run, victim = tmp_path / "run", tmp_path / "victim.txt"
    run.mkdir()
    victim.write_text("someone's precious file\n")
    (run / rundir.LOCK_NAME).symlink_to(victim)
    result = run_cli("train", toy_data, "--out", run, *FAST, "--max-steps", "1")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "is a symbolic link" in result.stderr and victim.read_text() == "someone's precious file\n"
    assert sorted(p.name for p in run.iterdir()) == [rundir.LOCK_NAME]  # nothing was written


def test_a_hard_link_in_place_of_the_lock_is_left_untouched(tmp_path) -> None:
    """fault: .train.lock is a hard link to another file; expected: one sentence, the file's bytes unchanged."""
    run, victim = tmp_path / "run", tmp_path / "victim.txt"
    run.mkdir()
    victim.write_text("someone's precious file\n")
    os.link(victim, run / rundir.LOCK_NAME)
    try:
        with rundir.locked(run):
            raise AssertionError("a hard-linked lock file was used")
    except Exception as exc:  # MtkitError
        assert "hard link" in str(exc)
    assert victim.read_text() == "someone's precious file\n"


def test_the_lock_file_is_never_truncated(tmp_path) -> None:
    """fault: an old lock file with a longer holder line; expected: the first line names this holder, no truncation."""
    run = tmp_path / "run"
    run.mkdir()
    (run / rundir.LOCK_NAME).write_text("pid 1234567 on a-very-long-host-name.example.org\n")
    with rundir.locked(run):
        first = (run / rundir.LOCK_NAME).read_text().split("\n")[0]
    assert first == f"pid {os.getpid()} on {socket.gethostname()}"


def test_a_filesystem_without_flock_trains_with_one_warning(toy_data, tmp_path, monkeypatch) -> None:
    """fault: flock fails with ENOLCK (NFS, Lustre noflock); expected: exit 0, one warning, no traceback."""

    def no_flock(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_flock)
    result = run_cli("train", toy_data, "--out", tmp_path / "run", *FAST, "--max-steps", "1")
    assert result.returncode == 0, result.stderr
    assert "does not support file locks" in result.stderr and "Traceback" not in result.stderr


TWO_RANKS = """
import os, sys
import torch.distributed as dist
from pathlib import Path
from mtkit.errors import MtkitError
from mtkit.train import distributed, rundir

dist.init_process_group("gloo")
world = distributed.World(int(os.environ["RANK"]), 2, 0, distributed.pick_device("cpu", 0))
if world.is_main:
    def broken(run_dir):
        raise PermissionError(13, "Permission denied", str(run_dir))
    rundir.make_run_dir = broken
try:
    with rundir.owned(Path(sys.argv[1]), world, restart=False):
        print("entered")
except MtkitError as exc:
    print("sentence:", exc)
dist.destroy_process_group()
"""


def test_an_os_error_on_rank_0_ends_every_rank_with_a_sentence(tmp_path) -> None:
    """fault: rank 0 cannot take RUN (an OSError) under torchrun; expected: both ranks end with a sentence, no hang."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", TWO_RANKS, str(tmp_path / "run")],
            env={**env, "RANK": str(rank), "WORLD_SIZE": "2"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    outs = []
    for proc in ranks:
        try:
            outs.append(proc.communicate(timeout=300))  # a deadline for a hang, not a timing assertion
        except subprocess.TimeoutExpired:
            for p in ranks:
                p.kill()
            raise AssertionError("a rank hung waiting for rank 0") from None
    assert all(p.returncode == 0 for p in ranks), outs
    assert "sentence: cannot use the run directory" in outs[0][0] and "Permission denied" in outs[0][0]
    assert "sentence: rank 0 could not take the run directory" in outs[1][0]
