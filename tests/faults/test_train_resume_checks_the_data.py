"""Resuming on another corpus with the same spm.model: refused, naming the file that differs."""

from __future__ import annotations

import json
import shutil

from mtkit import checkpoint
from tests.support.cli import run_cli
from tests.support.training import FAST, in_process_run


def test_resume_on_other_training_text_names_the_file(toy_data, tmp_path) -> None:
    """fault: resume with different train text (same vocabulary); expected: exit 1 naming raw/train.de."""
    data = shutil.copytree(toy_data, tmp_path / "data")
    run = tmp_path / "run"
    in_process_run(data, run, max_steps=2)
    recorded = checkpoint.load(run / "checkpoint_last.pt")["corpus"]
    assert set(recorded) == {"train", "valid"} and len(recorded["train"]["de"]) == 64
    info = json.loads((data / "bpe.json").read_text())
    info["splits"]["train"]["inputs"]["de"] = "0" * 64  # what `mtkit bpe` records after the text changed
    (data / "bpe.json").write_text(json.dumps(info))
    again = run_cli("train", data, "--out", run, *FAST, "--max-steps", "4")
    assert again.returncode == 1 and "Traceback" not in again.stderr
    assert "was trained on other data: raw/train.de had sha256" in " ".join(again.stderr.split())
    assert checkpoint.load(run / "checkpoint_last.pt")["step"] == 2
