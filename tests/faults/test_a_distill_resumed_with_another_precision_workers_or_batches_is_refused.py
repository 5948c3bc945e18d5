"""A distillation killed halfway and rerun with another precision, other workers or other batches would mix two
outputs (its first chunks one way, the rest another): the resume compares how the teacher runs, and refuses."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from mtkit import distill
from mtkit.decode import loading
from tests.support.cli import run_cli
from tests.support.distill import toy_task


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> tuple[Path, Path, Path]:
    return toy_task(tmp_path_factory.mktemp("distill-resume"))


def killed_after_one_chunk(data: Path, teacher: Path, out: Path, monkeypatch, **runtime) -> None:
    """An int8 (or other) distillation killed in its second chunk: one chunk of the teacher's on disk."""
    real, opened = distill.atomic_file, []

    @contextlib.contextmanager
    def killed(path):
        opened.append(path)
        with real(path) as f:
            yield f
            if len(opened) == 2:
                raise KeyboardInterrupt

    monkeypatch.setattr(distill, "atomic_file", killed)
    plan = loading.plan([teacher], device="cpu", beam=1, max_len_b=8, **runtime)
    with pytest.raises(KeyboardInterrupt):
        distill.distill(data, plan, out, distill.DistillOptions(chunk_lines=9))
    monkeypatch.setattr(distill, "atomic_file", real)
    assert len(list((out / distill.CHUNKS).glob("*.tsv"))) == 1


@pytest.mark.parametrize(
    ("first", "rerun", "said"),
    [
        ({"precision": "int8"}, (), "runtime.precision 'int8', now 'fp32'"),
        ({"workers": 2}, (), "runtime.workers 2, now 1"),
        ({}, ("--batch-tokens", "64"), "runtime.batch_tokens 4096, now 64"),
    ],
    ids=["precision", "workers", "batches"],
)
def test_a_resume_that_would_mix_two_runtimes_is_refused(toy, tmp_path, monkeypatch, first, rerun, said):
    data, teacher, _ = toy
    out = tmp_path / "new"
    killed_after_one_chunk(data, teacher, out, monkeypatch, **first)
    args = ("distill", data, "-m", teacher, "--out", out, "--beam", "1", "--max-len-b", "8", "--chunk-lines", "9")
    done = run_cli(*args, "--device", "cpu", *rerun)
    assert done.returncode == 1, done.stderr
    assert said in done.stderr and "--restart" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert len(list((out / distill.CHUNKS).glob("*.tsv"))) == 1  # nothing of the first run's lost


def test_the_same_runtime_resumes_and_auto_is_the_device_it_resolves_to(toy, tmp_path, monkeypatch):
    """`--device auto` on a machine without a GPU is the CPU the first run asked for by name: the same run."""
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("auto is CUDA here")
    data, teacher, _ = toy
    out = tmp_path / "new"
    killed_after_one_chunk(data, teacher, out, monkeypatch)
    args = ("distill", data, "-m", teacher, "--out", out, "--beam", "1", "--max-len-b", "8", "--chunk-lines", "9")
    done = run_cli(*args, "--device", "auto")
    assert done.returncode == 0, done.stderr
    assert "resuming: 1 of 3 chunks" in done.stderr
