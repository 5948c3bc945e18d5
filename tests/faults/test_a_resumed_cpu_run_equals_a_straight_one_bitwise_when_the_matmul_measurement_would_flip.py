"""Exact resume on the CPU: the runtime decisions a run made at its start travel in its checkpoints.

The fp32 CPU products' backend is measured (oneDNN against PyTorch's default, mtkit/runtime/matmul.py), and
where the two are close a second measurement can answer otherwise. Here the measurement is made to flip
between the start and the resume, as a busy machine can make it; the resumed run must keep the checkpoint's
answer and end with the same bits as a run that was never stopped.
"""

from __future__ import annotations

import json

import pytest
import torch

from mtkit import checkpoint
from mtkit.runtime import matmul
from mtkit.train import resume
from tests.support.training import in_process_run

SETTINGS = {"max_steps": 8, "save_every_steps": 4, "valid_every": 4, "precision": "fp32"}


class Killed(BaseException):
    """The process dies right after a checkpoint is written (nothing of the run's own cleanup matters)."""


def measured(speedup: float):
    def onednn_speedup(d_model: int = 512, training: bool = True) -> float:
        return speedup

    return onednn_speedup


def first_record(run) -> dict:
    starts = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"start"' in line]
    return starts[-1]


@pytest.mark.skipif(not matmul.onednn_works(), reason="this PyTorch build has no oneDNN linear op")
def test_a_resumed_cpu_run_equals_a_straight_one_bitwise_when_the_matmul_measurement_would_flip(
    toy_data, tmp_path, monkeypatch
) -> None:
    """fault: the fp32 CPU products' backend is measured again when a killed run resumes, and answers otherwise
    (oneDNN, then the default); expected: the resume keeps its checkpoint's runtime and ends bitwise equal to a
    straight run."""
    monkeypatch.delenv(matmul.BACKEND_ENV, raising=False)
    monkeypatch.setattr(matmul, "onednn_speedup", measured(2.0))  # oneDNN wins at the start
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    in_process_run(toy_data, straight, **SETTINGS)
    assert first_record(straight)["fp32_matmul"] == "onednn"

    real_save = checkpoint.save_checkpoint

    def die_after_step_4(payload, run_dir, keep_last, **kwargs):
        path = real_save(payload, run_dir, keep_last, **kwargs)
        if payload["step"] == 4:
            raise Killed
        return path

    monkeypatch.setattr(checkpoint, "save_checkpoint", die_after_step_4)
    with pytest.raises(Killed):
        in_process_run(toy_data, resumed, **SETTINGS)
    monkeypatch.setattr(checkpoint, "save_checkpoint", real_save)
    saved = checkpoint.load(resumed / "checkpoint_last.pt")
    assert saved["step"] == 4 and saved["runtime"]["matmul"] == "onednn"

    monkeypatch.setattr(matmul, "onednn_speedup", measured(1.0))  # the same measurement now keeps the default
    in_process_run(toy_data, resumed, **SETTINGS)
    start = first_record(resumed)
    assert start["fp32_matmul"] == "onednn" and start["runtime_from"].startswith("the checkpoint")
    a, b = checkpoint.load(straight / "checkpoint_last.pt"), checkpoint.load(resumed / "checkpoint_last.pt")
    assert a["step"] == b["step"] == 8
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name

    # A checkpoint written before the record (no "runtime") resumes as before: decided afresh, here the default.
    del saved["runtime"]
    assert resume.kept_runtime(saved, "auto", torch.device("cpu"), compiled=False) is None
    # What else makes a resume decide afresh: another device type, or another precision asked for now.
    kept = checkpoint.load(resumed / "checkpoint_last.pt")
    assert resume.kept_runtime(kept, "auto", torch.device("cpu"), compiled=False).matmul == "onednn"
    assert resume.kept_runtime(kept, "bf16", torch.device("cpu"), compiled=False) is None
    assert resume.kept_runtime(kept, "auto", torch.device("cuda"), compiled=False) is None
    assert resume.kept_runtime(kept, "auto", torch.device("cpu"), compiled=True) is None  # oneDNN: eager only
