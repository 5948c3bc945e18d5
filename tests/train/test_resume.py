"""Exact resume: 20 updates straight = 10 updates, kill -9, the same command again; atomic checkpoint writes."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from mtkit import checkpoint
from mtkit.config import PRESETS
from mtkit.errors import MtkitError
from mtkit.train.progress import Progress
from tests.support.cli import ROOT, run_cli

ARGS = (
    "--preset",
    "tiny",
    "--max-tokens",
    "512",
    "--max-steps",
    "20",
    "--save-every-steps",
    "10",
    "--valid-every",
    "10",
    "--log-every",
    "5",
    "--device",
    "cpu",
    "--threads",
    "1",
    "--seed",
    "5",
)

KILLER = textwrap.dedent("""
    import os, signal, sys
    import torch
    from mtkit import checkpoint, cli
    saves = {"n": 0}
    real_save, real_torch_save = checkpoint.save_checkpoint, torch.save
    def die_after_step(payload, run_dir, keep_last, **kwargs):
        path = real_save(payload, run_dir, keep_last, **kwargs)
        if payload["step"] == int(os.environ["KILL_AFTER_STEP"]):
            os.kill(os.getpid(), signal.SIGKILL)
        return path
    def die_mid_write(obj, f, *args, **kwargs):
        saves["n"] += 1
        if saves["n"] == int(os.environ.get("KILL_IN_WRITE", "0")):
            f.write(b"PK\\x03\\x04 half a checkpoint")
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return real_torch_save(obj, f, *args, **kwargs)
    checkpoint.save_checkpoint = die_after_step
    torch.save = die_mid_write
    sys.argv = ["mtkit", *sys.argv[1:]]
    cli.main()
""")


def run_killed(*args: str, **env: str) -> subprocess.CompletedProcess:
    """The real CLI in a process that SIGKILLs itself at a chosen moment (no cleanup code can run)."""
    return subprocess.run(
        [sys.executable, "-c", KILLER, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "KILL_AFTER_STEP": "-1", **env},
    )


def weights(path) -> dict[str, torch.Tensor]:
    return checkpoint.load(path)["model"]


@pytest.mark.slow
def test_kill_9_and_rerun_gives_the_same_weights_as_a_straight_run(toy_data, tmp_path) -> None:
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    done = run_cli("train", toy_data, "--out", straight, *ARGS)
    assert done.returncode == 0, done.stderr
    killed = run_killed("train", str(toy_data), "--out", str(resumed), *ARGS, KILL_AFTER_STEP="10")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert checkpoint.load(resumed / "checkpoint_last.pt")["step"] == 10
    again = run_cli("train", toy_data, "--out", resumed, *ARGS)
    assert again.returncode == 0, again.stderr
    assert "resume | step 10" in again.stderr

    a, b = checkpoint.load(straight / "checkpoint_last.pt"), checkpoint.load(resumed / "checkpoint_last.pt")
    assert a["step"] == b["step"] == 20
    assert a["data"]["epoch"] >= 2  # the 20 updates crossed epoch boundaries, the kill was mid-epoch
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name  # bitwise on CPU
    for sa, sb in zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values()):
        assert all(torch.equal(sa[k], sb[k]) for k in sa)

    # Rerunning a finished run does nothing and changes nothing.
    finished = run_cli("train", toy_data, "--out", resumed, *ARGS)
    assert finished.returncode == 0 and "nothing to do" in finished.stderr
    assert all(torch.equal(t, weights(resumed / "checkpoint_last.pt")[k]) for k, t in b["model"].items())


@pytest.mark.slow
def test_a_kill_during_a_checkpoint_write_leaves_the_previous_one(toy_data, tmp_path) -> None:
    run = tmp_path / "run"
    args = (*ARGS[:-4], "--save-every-steps", "5", "--max-steps", "10", "--seed", "5")
    # torch.save calls: checkpoint_5 (1), then checkpoint_10 (2; checkpoint_last and _best become links to it).
    killed = run_killed("train", str(toy_data), "--out", str(run), *args, KILL_IN_WRITE="2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert checkpoint.load(run / "checkpoint_last.pt")["step"] == 5
    assert not (run / "checkpoint_10.pt").exists()
    assert list(run.glob(".checkpoint_10.pt.*.tmp"))  # the half-written file never took the real name
    with pytest.raises(MtkitError):
        checkpoint.load(next(run.glob(".checkpoint_10.pt.*.tmp")))
    resumed = run_cli("train", toy_data, "--out", run, *args)
    assert resumed.returncode == 0, resumed.stderr
    assert checkpoint.load(run / "checkpoint_last.pt")["step"] == 10
    assert not list(run.glob(".*.tmp"))  # leftovers of the killed write are cleaned up


def test_an_interrupted_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch) -> None:
    payload = {"format": "mtkit", "version": 1, "kind": "model", "model": {"w": torch.ones(3)}, "step": 1}
    checkpoint.save_checkpoint(payload, tmp_path, keep_last=5)

    def interrupted(obj, f, *args, **kwargs):
        f.write(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save_checkpoint({**payload, "step": 2}, tmp_path, keep_last=5)
    assert checkpoint.load(tmp_path / "checkpoint_last.pt")["step"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_1.pt", "checkpoint_last.pt"]


def test_keep_last_removes_only_the_oldest_numbered_checkpoints(tmp_path) -> None:
    for step in (3, 10, 7, 12):
        checkpoint.save_checkpoint({"format": "mtkit", "version": 1, "step": step}, tmp_path, keep_last=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_10.pt", "checkpoint_12.pt", "checkpoint_last.pt"]
    assert checkpoint.load(tmp_path / "checkpoint_last.pt")["step"] == 12


def test_rng_state_round_trips_through_a_weights_only_file(tmp_path) -> None:
    import random

    import numpy as np

    state = checkpoint.rng_state()
    checkpoint.atomic_save({"rng": state}, tmp_path / "r.pt")
    loaded = torch.load(tmp_path / "r.pt", weights_only=True)["rng"]
    expected = (random.random(), float(np.random.rand()), torch.rand(3))
    random.random(), np.random.rand(), torch.rand(7)  # move every generator on
    checkpoint.set_rng_state(loaded)
    assert (random.random(), float(np.random.rand())) == expected[:2]
    assert torch.equal(torch.rand(3), expected[2])


@pytest.mark.slow
def test_a_different_model_config_refuses_to_resume(toy_data, tmp_path) -> None:
    run = tmp_path / "run"
    first = run_cli("train", toy_data, "--out", run, *ARGS[:-8], "--max-steps", "2", "--device", "cpu")
    assert first.returncode == 0, first.stderr
    other = run_cli(
        "train", toy_data, "--out", run, *ARGS[:-8], "--max-steps", "4", "--set", "d_ff=96", "--set", "encoder_layers=1"
    )
    assert other.returncode == 1
    assert "different model config" in other.stderr and "d_ff: 128 != 96" in other.stderr
    assert "encoder_layers: 2 != 1" in other.stderr and "Traceback" not in other.stderr


# Where training stands, as the checkpoints written so far hold it (those must keep resuming).
SAVED_POSITION = {
    "step": 12,
    "data": {"epoch": 1, "batch": 3, "world_size": 2, "max_tokens": 512, "seed": 5},
    "progress": {"epoch": 1, "batch": 3, "best": 4.5, "bad_valids": 1, "nonfinite": 0, "elapsed": 81.5},
}


def test_progress_reads_and_writes_the_checkpoint_keys_earlier_runs_wrote() -> None:
    cfg = dataclasses.replace(PRESETS["tiny"].train, max_tokens=512, seed=5)
    p = Progress.from_state_dict(SAVED_POSITION, world_size=2, cfg=cfg)
    assert p == Progress(step=12, epoch=1, batch=3, best=4.5, bad_valids=1, nonfinite=0, elapsed=81.5)
    written = p.state_dict(2, cfg)  # the same keys, and one they did not have (False: no validation due)
    assert written == {**SAVED_POSITION, "progress": {**SAVED_POSITION["progress"], "valid_due": False}}


def test_another_batch_plan_resumes_at_the_start_of_the_next_epoch() -> None:
    cfg = dataclasses.replace(PRESETS["tiny"].train, max_tokens=512, seed=5)
    for world_size, changed in ((1, cfg), (2, dataclasses.replace(cfg, max_tokens=256))):
        p = Progress.from_state_dict(SAVED_POSITION, world_size=world_size, cfg=changed)
        assert (p.step, p.epoch, p.batch, p.best) == (12, 2, 0, 4.5)
