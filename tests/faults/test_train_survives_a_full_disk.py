"""Disk full while checkpointing: one sentence, the previous checkpoint intact, no temporary left."""

from __future__ import annotations

import errno

import pytest
import torch

from mtkit import checkpoint
from mtkit.errors import MtkitError
from tests.support.training import in_process_run


def test_a_full_disk_while_saving_keeps_the_previous_checkpoint(toy_data, tmp_path, monkeypatch) -> None:
    """fault: ENOSPC during the second checkpoint write; expected: one sentence, checkpoint of step 2 intact."""
    real, calls = torch.save, {"n": 0}

    def disk_full_on_call_2(obj, f, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            f.write(b"PK\x03\x04 the first blocks")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", disk_full_on_call_2)
    run = tmp_path / "run"
    with pytest.raises(MtkitError) as caught:
        in_process_run(toy_data, run, max_steps=4, save_every_steps=2)
    message = str(caught.value)
    assert "checkpoint_4.pt" in message and "No space left on device" in message and "\n" not in message
    monkeypatch.setattr(torch, "save", real)
    assert checkpoint.load(run / "checkpoint_last.pt")["step"] == 2
    assert not (run / "checkpoint_4.pt").exists() and not list(run.glob(".*.tmp"))


def test_torch_reports_a_failed_write_as_runtime_error_and_it_is_one_sentence(tmp_path, monkeypatch) -> None:
    """torch.save wraps the OSError of a failed write in a RuntimeError: that is one sentence too."""

    def wrapped(obj, f, *args, **kwargs):
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc] . unexpected pos 64 vs 0")  # noqa: B904

    monkeypatch.setattr(torch, "save", wrapped)
    with pytest.raises(MtkitError, match="No space left on device"):
        checkpoint.atomic_save({"w": torch.ones(1)}, tmp_path / "x.pt")
    assert list(tmp_path.iterdir()) == []
