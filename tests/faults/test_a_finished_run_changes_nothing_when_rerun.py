"""A run that stopped (patience, max-steps, max-minutes, max-epochs), rerun with the same command: nothing changes."""

from __future__ import annotations

import logging

import pytest

from mtkit.train import trainer
from mtkit.train.validation import Validation
from tests.support.training import in_process_run, snapshot


@pytest.mark.parametrize(
    "limit",
    [
        {"max_steps": 3},
        {"max_epochs": 1, "max_steps": 1000},
        {"max_minutes": 0.0001, "max_steps": 1000},
        {"patience": 2, "valid_every": 1, "max_steps": 1000},
    ],
    ids=["max-steps", "max-epochs", "max-minutes", "patience"],
)
def test_a_finished_run_is_said_to_be_finished_and_left_alone(toy_data, tmp_path, monkeypatch, caplog, limit) -> None:
    """fault: rerun a finished run; expected: says it is finished; no update, no validation, no file changed."""
    if "patience" in limit:  # validations that never improve after the first
        scores = iter(range(100))
        monkeypatch.setattr(
            trainer, "validate", lambda *a, **k: Validation(dict.fromkeys(("loss", "nll", "ppl"), float(next(scores))))
        )
    run = tmp_path / "run"
    first = in_process_run(toy_data, run, save_every_steps=0, **limit)
    before = snapshot(run)
    monkeypatch.setattr(trainer, "accumulate", lambda *a, **k: pytest.fail("a finished run trained again"))
    monkeypatch.setattr(trainer, "validate", lambda *a, **k: pytest.fail("a finished run validated again"))
    with caplog.at_level(logging.INFO, logger="mtkit"):
        again = in_process_run(toy_data, run, save_every_steps=0, **limit)
    assert (again.stopped, again.step) == (first.stopped, first.step) == (next(iter(limit)), first.step)
    assert "nothing to do" in caplog.text and f"({first.stopped})" in caplog.text
    assert snapshot(run) == before
