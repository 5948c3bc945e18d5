"""A broken or missing checkpoint_last.pt: resume from the newest readable checkpoint_<step>.pt, never from step 0.

With nothing readable left, a fresh run in that directory is refused unless --restart, which
moves the old files to RUN/previous-<time>/ and deletes nothing.
"""

from __future__ import annotations

import pytest

from mtkit import checkpoint
from tests.support.cli import run_cli
from tests.support.training import FAST

ARGS = (*FAST, "--save-every-steps", "2", "--valid-every", "100", "--log-every", "100")


@pytest.fixture
def run_of_4_steps(toy_data, tmp_path):
    run = tmp_path / "run"
    done = run_cli("train", toy_data, "--out", run, *ARGS, "--max-steps", "4")
    assert done.returncode == 0, done.stderr
    assert {p.name for p in run.glob("checkpoint_*.pt")} >= {"checkpoint_2.pt", "checkpoint_4.pt", "checkpoint_last.pt"}
    return run


def test_a_damaged_last_checkpoint_falls_back_past_its_hard_link(toy_data, run_of_4_steps) -> None:
    """fault: checkpoint_last.pt damaged in place; expected: warning naming it, resume from checkpoint_2.pt."""
    run = run_of_4_steps
    with open(run / "checkpoint_last.pt", "r+b") as f:  # the same inode as checkpoint_4.pt: both are damaged
        f.write(b"garbage" * 100)
    again = run_cli("train", toy_data, "--out", run, *ARGS, "--max-steps", "6")
    assert again.returncode == 0, again.stderr
    warning = next(line for line in again.stderr.splitlines() if "resuming from" in line)
    assert "checkpoint_2.pt" in warning and "checkpoint_last.pt:" in warning
    assert "checkpoint_4.pt:" not in warning  # skipped without a second attempt: it is the same file
    assert "resume | step 2" in again.stderr
    assert checkpoint.load(run / "checkpoint_last.pt")["step"] == 6


def test_a_deleted_last_checkpoint_resumes_from_the_newest_numbered_one(toy_data, run_of_4_steps) -> None:
    """fault: checkpoint_last.pt deleted; expected: resume from checkpoint_4.pt, not a silent restart at step 0."""
    run = run_of_4_steps
    (run / "checkpoint_last.pt").unlink()
    again = run_cli("train", toy_data, "--out", run, *ARGS, "--max-steps", "6")
    assert again.returncode == 0, again.stderr
    assert "checkpoint_last.pt is missing" in again.stderr and "resume | step 4" in again.stderr


def test_nothing_readable_is_refused_and_restart_moves_it_aside(toy_data, run_of_4_steps) -> None:
    """fault: every checkpoint unreadable; expected: one sentence naming --restart; --restart keeps the old files."""
    run = run_of_4_steps
    for path in run.glob("checkpoint_*.pt"):
        path.write_bytes(b"not a checkpoint")
    refused = run_cli("train", toy_data, "--out", run, *ARGS, "--max-steps", "6")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "none can be resumed" in refused.stderr and "--restart" in refused.stderr
    old = sorted(p.name for p in run.iterdir())
    fresh = run_cli("train", toy_data, "--out", run, *ARGS, "--max-steps", "2", "--restart")
    assert fresh.returncode == 0, fresh.stderr
    assert "resume |" not in fresh.stderr and checkpoint.load(run / "checkpoint_last.pt")["step"] == 2
    previous = list(run.glob("previous-*"))
    assert len(previous) == 1
    assert sorted(p.name for p in previous[0].iterdir()) == [n for n in old if n != ".train.lock"]
