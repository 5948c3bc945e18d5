"""recipes/slurm/train.sbatch, the SLURM job of docs/gpus.md, under a fake SLURM: `sbatch` runs the script in the
background as job 42, `scontrol requeue 42` starts it again once the first start has ended (as SLURM requeues).

The job is signalled as SLURM signals it before the time limit (SIGUSR1 to the batch shell); the script stops
mtkit, which saves, asks for the requeue, and the requeued job resumes and finishes at exactly --max-steps, with
the weights of a run that was never stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from mtkit import checkpoint
from tests.support.cli import ROOT, run_cli
from tests.support.training import FAST, wait_for_event

SCRIPT = ROOT / "recipes" / "slurm" / "train.sbatch"
STEPS = 40
OPTIONS = ("--log-every", "1", "--valid-every", "1000", "--save-every-steps", "0", "--max-steps", str(STEPS))

FAKE_SBATCH = """#!/bin/bash
# Start the job script in the background as job 42; remember how, for a requeue; each start's exit code in FAKE/.
echo "$@" >"$FAKE/job"
n=$(( $(ls "$FAKE" | grep -c '^start') + 1 ))
(
    SLURM_JOB_ID=42 SLURM_RESTART_COUNT=$((n - 1)) bash "$@" >>"$FAKE/out" 2>&1 &
    echo $! >"$FAKE/start.$n"  # the batch shell: where SLURM's signals go
    wait $!
    echo $? >"$FAKE/exit.$n"
) </dev/null >/dev/null 2>&1 &
while [[ ! -s $FAKE/start.$n ]]; do sleep 0.01; done
echo "Submitted batch job 42"
"""
FAKE_SCONTROL = """#!/bin/bash
echo "$*" >>"$FAKE/scontrol"
[[ $1 == requeue && $2 == 42 ]] || exit 1
# As SLURM: the job starts again from its script once this start has ended.
parent=$PPID
( while kill -0 "$parent" 2>/dev/null; do sleep 0.05; done; sbatch $(cat "$FAKE/job") ) </dev/null >/dev/null 2>&1 &
"""


def wait_for(path: Path, process_hint: Path, limit_s: float = 300) -> str:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path.name} never came: {process_hint.read_text() if process_hint.exists() else ''}")


@pytest.mark.slow
def test_the_slurm_job_saves_requeues_itself_and_finishes_exactly(toy_data: Path, tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    bin_dir = tmp_path / "bin"
    fake.mkdir()
    bin_dir.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (bin_dir / "mtkit").write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m mtkit "$@"\n')
    (bin_dir / "mtkit").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE": str(fake), "MTKIT_LAUNCH": "mtkit"}
    run = tmp_path / "run"

    submitted = subprocess.run(
        ["sbatch", str(SCRIPT), str(toy_data), "--out", str(run), *FAST, *OPTIONS],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert submitted.stdout.strip() == "Submitted batch job 42", submitted.stderr
    script = int(wait_for(fake / "start.1", fake / "out"))

    class Job:  # what wait_for_event asks of a process: whether it still runs
        def poll(self) -> int | None:
            return None if not (fake / "exit.1").exists() else 1

        def communicate(self) -> tuple[str, str]:
            return "", (fake / "out").read_text()

    wait_for_event(run, "train", Job())  # type: ignore[arg-type]
    os.kill(script, signal.SIGUSR1)  # SLURM's warning before the time limit: to the batch shell only

    assert wait_for(fake / "exit.1", fake / "out") == "0"
    assert (fake / "scontrol").read_text() == "requeue 42\n"
    assert wait_for(fake / "exit.2", fake / "out") == "0", (fake / "out").read_text()
    log = (fake / "out").read_text()
    assert "stopped by a signal (exit 143), checkpoint saved; requeueing job 42" in log, log
    assert "mtkit: SIGTERM: saved" in log and "training finished" in log, log
    assert (fake / "scontrol").read_text() == "requeue 42\n", "requeued once"

    stopped_at = int(log.split("resume | step ")[1].split()[0])
    assert 1 <= stopped_at < STEPS
    resumed = checkpoint.load(run / "checkpoint_last.pt")
    assert resumed["step"] == STEPS

    straight = tmp_path / "straight"
    done = run_cli("train", toy_data, "--out", straight, *FAST, *OPTIONS)
    assert done.returncode == 0, done.stderr
    unbroken = checkpoint.load(straight / "checkpoint_last.pt")
    for name, tensor in unbroken["model"].items():
        assert torch.equal(tensor, resumed["model"][name]), name
