"""Tiny training runs: in this process, or the real CLI in the background; what they leave, and runs with records.

FAST: the options of a tiny, seeded run on one CPU thread (add --max-steps).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from mtkit.config import PRESETS, model_config
from mtkit.train import rundir, trainer
from tests.support.cli import ROOT
from tests.support.corpora import data_vocab_size
from tests.support.metrics import records_so_far

FAST = ("--preset", "tiny", "--max-tokens", "512", "--device", "cpu", "--threads", "1", "--seed", "5")


def in_process_run(data: Path, run: Path, **changes: object) -> trainer.TrainResult:
    """`mtkit train --preset tiny` without a subprocess; `changes` are TrainConfig fields."""
    cfg = dataclasses.replace(
        PRESETS["tiny"].train, **{"max_tokens": 512, "valid_every": 100, "log_every": 1, "seed": 5, **changes}
    )
    return trainer.train(data, run, model_config("tiny", data_vocab_size(data)), cfg, device="cpu", threads=1)


def start_training(
    data: Path, run: Path, *args: str, script: str | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """The real CLI (or `script`, a Python program that ends in mtkit's main) in the background."""
    command = [sys.executable, "-c", script] if script else [sys.executable, "-m", "mtkit"]
    process = subprocess.Popen(
        [*command, "train", str(data), "--out", str(run), *FAST, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )
    STARTED.append(process)
    return process


# Every training a test started: tests/conftest.py kills what is still running when the test ends, so that a test
# that failed while its training ran (a lost stop signal, a timeout) leaves no run behind to slow the others down.
STARTED: list[subprocess.Popen] = []


def wait_for_event(run: Path, event: str, process: subprocess.Popen, limit_s: float = 300) -> dict:
    """The first `event` record of a running training, polled (a deadline, not a timing assertion)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        found = [r for r in records_so_far(run) if r["event"] == event]
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


ARCHIVE_SHA = "ab" * 32


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def data_with_records(toy_data: Path, out: Path) -> Path:
    """The toy data copied under OUT, with the prepare.json and bpe.json of `mtkit prepare` and `mtkit bpe`."""
    data = out / "data"
    shutil.copytree(toy_data, data)
    (data / "prepare.json").write_text(
        json.dumps(
            {
                "corpus": "toy",
                "created": "2026-01-01T00:00:00+00:00",
                "sources": [
                    {"file": "toy.tgz", "url": "https://example.org/toy.tgz", "bytes": 10, "sha256": ARCHIVE_SHA}
                ],
            }
        )
    )
    bpe = json.loads((data / "bpe.json").read_text())
    bpe["model"] = {"file": "spm.model", "sha256": sha256(data / "spm.model")}
    for split in bpe["splits"]:
        bpe["splits"][split]["inputs"] = {lang: sha256(data / "raw" / f"{split}.{lang}") for lang in ("en", "de")}
    (data / "bpe.json").write_text(json.dumps(bpe))
    return data


def train_recorded(data: Path, run: Path, steps: int, tensorboard: bool = True) -> None:
    """A tiny run that leaves every record: validation BLEU, TensorBoard, checkpoints and validations every 3."""
    cfg = dataclasses.replace(
        PRESETS["tiny"].train,
        max_steps=steps,
        save_every_steps=3,
        valid_every=3,
        log_every=3,
        keep_last=5,
        valid_bleu=5,
        tensorboard=tensorboard,
    )
    trainer.train(data, run, model_config("tiny", data_vocab_size(data)), cfg, device="cpu", threads=1)
