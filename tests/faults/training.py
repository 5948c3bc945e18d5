"""Helpers for the training faults: a tiny run in this process or through the real CLI, and its records."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from mtkit.config import PRESETS, model_config
from mtkit.train import rundir, trainer
from tests.conftest import ROOT

FAST = ("--preset", "tiny", "--max-tokens", "512", "--device", "cpu", "--threads", "1", "--seed", "5")


def in_process_run(data: Path, run: Path, **changes: object) -> trainer.TrainResult:
    """`mtkit train --preset tiny` without a subprocess; `changes` are TrainConfig fields."""
    cfg = dataclasses.replace(
        PRESETS["tiny"].train, **{"max_tokens": 512, "valid_every": 100, "log_every": 1, "seed": 5, **changes}
    )
    vocab = json.loads((data / "bpe.json").read_text())["vocab_size"]
    return trainer.train(data, run, model_config("tiny", vocab), cfg, device="cpu", threads=1)


def records(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def start_training(
    data: Path, run: Path, *args: str, script: str | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """The real CLI (or `script`, a Python program that ends in mtkit's main) in the background."""
    command = [sys.executable, "-c", script] if script else [sys.executable, "-m", "mtkit"]
    return subprocess.Popen(
        [*command, "train", str(data), "--out", str(run), *FAST, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def wait_for_event(run: Path, event: str, process: subprocess.Popen, limit_s: float = 300) -> dict:
    """The first `event` record of a running training, polled (a deadline, not a timing assertion)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        found = [r for r in records(run) if r["event"] == event]
        if found:
            return found[0]
        if process.poll() is not None:
            raise AssertionError(f"training ended before a {event!r} record: {process.communicate()[1][-2000:]}")
        time.sleep(0.05)
    process.kill()
    raise AssertionError(f"no {event!r} record within {limit_s} s")


def snapshot(run: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under RUN with its modification time and bytes: what "changes nothing" compares.

    The lock file is left out: each run writes its own pid there while it holds the lock.
    """
    return {
        str(p.relative_to(run)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name != rundir.LOCK_NAME
    }
