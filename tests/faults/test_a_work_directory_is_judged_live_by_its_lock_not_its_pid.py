"""The stale-temporary sweep judges a work directory by the lock its owner holds, never by a pid.

A `prepare` or `export` in another container (or on another host) sharing the directory has a
pid that means nothing here: `os.kill(pid, 0)` would call its live work dead and delete it.
"""

from __future__ import annotations

import os
import subprocess
import sys

from mtkit import locks
from mtkit.files import LOCK_SUFFIX, sweep_stale, work_dir


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def _work(parent, name: str):
    path = parent / name
    (path / "raw").mkdir(parents=True)
    (path / "raw" / "train.en").write_text("work in progress\n")
    lock = path.with_name(name + LOCK_SUFFIX)
    lock.write_text("")
    return path, lock


def test_live_work_under_a_pid_unknown_here_is_kept(tmp_path) -> None:
    """fault: a live work directory named by a pid that is dead on this host (another container's); expected: kept."""
    other, other_lock = _work(tmp_path, f".prepare-{_dead_pid()}-abcd1234")
    held = locks.acquire(other_lock)  # its owner (played by this test) holds the lock
    try:
        assert sweep_stale(tmp_path, ".prepare-") == []
        assert (other / "raw" / "train.en").read_text() == "work in progress\n"
    finally:
        locks.release(held, remove=False)
    assert sweep_stale(tmp_path, ".prepare-") == [other]  # once the owner is gone, it is swept
    assert list(tmp_path.iterdir()) == []


def test_dead_work_under_a_live_pid_is_swept(tmp_path) -> None:
    """fault: a dead run's work directory whose pid now names a live process; expected: swept with its lock file."""
    dead, _ = _work(tmp_path, f".prepare-{os.getpid()}-efgh5678")  # a pid alive here, a lock no one holds
    assert sweep_stale(tmp_path, ".prepare-") == [dead]
    assert list(tmp_path.iterdir()) == []


def test_a_work_directory_holds_its_lock_for_its_whole_life(tmp_path) -> None:
    """fault: a sweep by another run while a work directory is in use; expected: the directory and its work stay."""
    with work_dir(tmp_path, ".prepare-") as tmp:
        (tmp / "part").write_text("x")
        assert sweep_stale(tmp_path, ".prepare-") == [] and (tmp / "part").read_text() == "x"
    assert list(tmp_path.iterdir()) == []  # gone with its lock file when the block ends


def test_a_directory_without_a_lock_file_is_left_alone(tmp_path) -> None:
    """fault: a work directory of an older mtkit (no lock file: nothing to judge it by); expected: left alone."""
    old = tmp_path / f".prepare-{_dead_pid()}-old12345"
    old.mkdir()
    assert sweep_stale(tmp_path, ".prepare-") == [] and old.is_dir()
