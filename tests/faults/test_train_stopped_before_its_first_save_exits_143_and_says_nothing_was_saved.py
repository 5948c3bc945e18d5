"""SIGTERM or SIGHUP to `mtkit train` before its loop starts (while it measures its settings, a minute or more).

The signal arrived before the loop's own handlers and came out as Ctrl-C's: exit 130 and "interrupted
at once; RUN/checkpoint_last.pt is the last complete save", a file that did not exist. Now the code is
the signal's (143, 129) and the line says what is true: nothing saved yet, the same command starts the run.
"""

from __future__ import annotations

import signal
import time

import pytest

from mtkit.train.rundir import LOCK_NAME
from tests.support.training import start_training

LONG = ("--max-steps", "100000", "--valid-every", "100000", "--save-every-steps", "0")


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_stop_before_the_first_save_exits_with_the_signals_code_and_says_nothing_was_saved(
    toy_data, tmp_path, signum, code
) -> None:
    """fault: SIGTERM (SIGHUP) to `train` in its first minute, before any checkpoint; expected: exit 143 (129), one
    line saying nothing is saved yet and the same command starts the run, no checkpoint named."""
    run = tmp_path / "run"
    process = start_training(toy_data, run, *LONG)
    deadline = time.monotonic() + 300
    while not (run / LOCK_NAME).exists():  # the run directory is taken: its settings are being worked out
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()[1][-2000:]
        time.sleep(0.005)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    if (run / "checkpoint_last.pt").exists():  # the loop had started and saved first: also a true stop
        assert f"mtkit: {signal.Signals(signum).name}: saved" in stderr, stderr
        return
    assert "nothing saved yet; the same command starts the run" in stderr, stderr
    assert "checkpoint_last.pt" not in stderr
