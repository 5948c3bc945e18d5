"""SIGHUP to `mtkit train` (the ssh session or terminal closes): a stop like SIGTERM, then its own exit code, 129.

Python's default was to die at once: exit 129 without a checkpoint, the progress since the
last save gone. Now the update finishes, checkpoint_last.pt is saved, one line says so, and
the code (128 + 1, as a shell reports SIGHUP) tells a hang-up from a scheduler's SIGTERM (143).
"""

from __future__ import annotations

import signal

from mtkit import checkpoint
from tests.support.metrics import records
from tests.support.training import start_training, wait_for_event

LONG = ("--max-steps", "100000", "--log-every", "1", "--valid-every", "100000", "--save-every-steps", "0")


def test_a_hang_up_finishes_the_update_saves_and_exits_129(toy_data, tmp_path) -> None:
    """fault: SIGHUP to `train` (the ssh session closes); expected: checkpoint_last.pt saved, one line, exit 129."""
    run = tmp_path / "run"
    process = start_training(toy_data, run, *LONG)
    wait_for_event(run, "train", process)
    process.send_signal(signal.SIGHUP)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 129, stderr
    assert "Traceback" not in stderr
    said = [line for line in stderr.splitlines() if "mtkit: SIGHUP: saved" in line]
    assert len(said) == 1 and "the same command resumes the run" in said[0], stderr
    done = records(run)[-1]
    assert done["event"] == "done" and done["stopped"] == "SIGHUP"
    assert checkpoint.load(run / "checkpoint_last.pt")["step"] == done["step"] >= 1
    assert not list(run.glob(".*.tmp"))
