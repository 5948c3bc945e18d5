"""SIGTERM (preemption) and Ctrl-C during `mtkit train`: the update finishes, checkpoint_last.pt is saved, one line,
and the exit code says which signal ended the run (143, 130), so that a Job or an elastic agent retries it.

A second Ctrl-C stops at once, in the middle of a checkpoint write, and leaves no half-written file.
"""

from __future__ import annotations

import re
import signal
import textwrap

import pytest

from mtkit import checkpoint
from tests.support.cli import run_cli
from tests.support.metrics import records
from tests.support.torchrun import RANK_WITH_PID, start_torchrun
from tests.support.training import FAST, start_training, wait_for_event

LONG = ("--max-steps", "100000", "--log-every", "1", "--valid-every", "100000", "--save-every-steps", "0")


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_a_signal_finishes_the_update_saves_and_exits(toy_data, tmp_path, sig, code) -> None:
    """fault: SIGTERM / Ctrl-C while training; expected: checkpoint_last.pt saved, one line, exit 143 / 130."""
    run = tmp_path / "run"
    process = start_training(toy_data, run, *LONG)
    wait_for_event(run, "train", process)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    name = signal.Signals(sig).name
    said = [line for line in stderr.splitlines() if f"mtkit: {name}: saved" in line]
    assert len(said) == 1 and "the same command resumes the run" in said[0]
    done = records(run)[-1]
    assert done["event"] == "done" and done["stopped"] == name
    saved = checkpoint.load(run / "checkpoint_last.pt")
    assert saved["step"] == done["step"] >= 1 and saved["kind"] == "checkpoint"
    assert not list(run.glob(".*.tmp"))
    again = run_cli("train", toy_data, "--out", run, *FAST, *LONG[2:], "--max-steps", str(saved["step"] + 1))
    assert again.returncode == 0 and f"resume | step {saved['step']}" in again.stderr, again.stderr


SECOND_CTRL_C = textwrap.dedent("""
    import os, signal, sys, time
    import torch
    from mtkit import cli
    real_save, calls = torch.save, {"n": 0}
    def ctrl_c_twice_mid_write(obj, f, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:  # the save of step 2; checkpoint_1.pt is complete
            requests = signal.getsignal(signal.SIGINT).__self__
            os.kill(os.getpid(), signal.SIGINT)  # the first Ctrl-C: finish, then save
            while not requests.received:
                time.sleep(0.01)
            f.write(b"PK\\x03\\x04 half a checkpoint")
            f.flush()
            os.kill(os.getpid(), signal.SIGINT)  # the second: stop now, mid-write
            time.sleep(60)
            raise AssertionError("the second Ctrl-C did not interrupt the write")
        return real_save(obj, f, *args, **kwargs)
    torch.save = ctrl_c_twice_mid_write
    sys.argv = ["mtkit", *sys.argv[1:]]
    cli.main()
""")


def test_a_second_ctrl_c_stops_at_once_without_a_half_written_file(toy_data, tmp_path) -> None:
    """fault: Ctrl-C twice, the second during a checkpoint write; expected: exit 130 at once, previous intact."""
    run = tmp_path / "run"
    process = start_training(toy_data, run, *LONG[:-1], "1", script=SECOND_CTRL_C)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr
    assert "mtkit: interrupted at once" in stderr and "Traceback" not in stderr
    assert checkpoint.load(run / "checkpoint_last.pt")["step"] == 1
    assert sorted(p.name for p in run.glob("*.pt")) == ["checkpoint_1.pt", "checkpoint_last.pt"]
    assert not list(run.glob(".*.tmp"))


@pytest.mark.slow
def test_sigterm_to_one_torchrun_rank_stops_every_rank_after_the_same_update(toy_data, tmp_path) -> None:
    """fault: SIGTERM to rank 1 of 2 (gloo); expected: both ranks stop after the same update, one save, exit 143."""
    # A rank that exits 143 is a failed worker to torchrun, which then ends the others (SIGTERM) and exits 1
    # itself, or restarts them all with --max-restarts: the preempted run is not counted as done.
    import os
    import time

    run, script = tmp_path / "run", tmp_path / "rank.py"
    script.write_text(RANK_WITH_PID)
    process = start_torchrun(script, "train", toy_data, "--out", run, *FAST, "--max-tokens", "400", *LONG)
    wait_for_event(run, "train", process)
    deadline = time.monotonic() + 60
    while not (run / "rank1.pid").is_file() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(int((run / "rank1.pid").read_text()), signal.SIGTERM)  # rank 1 alone: rank 0 learns it by all-reduce
    _, stderr = process.communicate(timeout=300)
    assert process.returncode != 0 and re.search(r"exitcode\s*:\s*143", stderr), stderr[-3000:]
    exits = [p.read_text() for p in run.glob("rank*.exit")]  # a rank torchrun ended first has no say
    assert exits and set(exits) == {"143"}, exits
    assert stderr.count("mtkit: SIGTERM: saved") == 1
    frames = [line for line in stderr.splitlines() if line.lstrip().startswith('File "')]
    assert not [f for f in frames if "/mtkit/" in f], stderr[-3000:]  # torchrun's own report only
    done = records(run)[-1]
    saved = checkpoint.load(run / "checkpoint_last.pt")
    assert done["stopped"] == "SIGTERM" and saved["step"] == done["step"] and len(saved["rng"]) == 2
