"""A finite loss with a non-finite gradient: the update is skipped like a non-finite loss, and logged."""

from __future__ import annotations

import logging

import torch

from mtkit.train import trainer
from tests.support.metrics import records
from tests.support.training import in_process_run


def test_an_infinite_gradient_skips_the_update_and_the_weights_stay_finite(
    toy_data, tmp_path, monkeypatch, caplog
) -> None:
    """fault: finite loss, inf gradient at update 2; expected: update skipped, warning, weights finite."""
    real, calls = trainer.accumulate, {"n": 0}

    def inf_gradient_on_update_2(model, *args, **kwargs):
        sums = real(model, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 2:
            next(model.parameters()).grad[0, 0] = float("inf")
        return sums

    monkeypatch.setattr(trainer, "accumulate", inf_gradient_on_update_2)
    with caplog.at_level(logging.WARNING):
        result = in_process_run(toy_data, tmp_path / "run", max_steps=3, save_every_steps=0)
    assert result.step == 3 and calls["n"] == 4  # 4 updates, one skipped
    assert "nonfinite | step 2 | in_a_row 1 | action update skipped" in caplog.text
    logged = records(tmp_path / "run")
    skipped = [r for r in logged if r["event"] == "nonfinite"]
    assert [r["step"] for r in skipped] == [2] and skipped[0]["grad_norm"] is None  # inf, written as JSON null
    assert all(torch.isfinite(p).all() for p in result.model.parameters())
    norms = [r["grad_norm"] for r in logged if r["event"] == "train"]
    assert len(norms) == 3 and all(0 < n < float("inf") for n in norms)  # the train line shows the grad norm
