"""RUN/metrics.jsonl is strict JSON: a NaN or infinite value is written as null, never `NaN`/`Infinity`.

Python's json writes those two words, which jq, JavaScript and other strict readers reject (the
whole file, not one line). `mtkit plot` and `mtkit info` read the nulls as "no value here".
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mtkit.info import describe
from mtkit.plot import curves, load_runs
from mtkit.train.metrics import MetricsLog


def _strict(line: str) -> dict:
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(line, parse_constant=refuse)


@pytest.fixture
def diverged_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    log = MetricsLog(run, enabled=True, max_steps=3, start_step=0)
    log.event("start", params=10)
    log.event("train", step=1, loss=5.0, ppl=148.4, grad_norm=1.5)
    log.event("nonfinite", step=2, loss=math.nan, grad_norm=math.inf, extra={"norms": [np.float32("nan"), 2.0]})
    log.event("train", step=3, loss=math.nan, ppl=math.inf, grad_norm=-math.inf)
    log.event("valid", step=3, loss=4.0, ppl=54.6, bleu=math.nan)
    log.close()
    return run


def test_non_finite_values_are_written_as_null(diverged_run) -> None:
    """fault: NaN and infinite losses and norms logged; expected: every line strict JSON, those values null."""
    lines = (diverged_run / "metrics.jsonl").read_text().splitlines()
    records = [_strict(line) for line in lines]  # raises on NaN / Infinity
    skipped = records[2]
    assert skipped["loss"] is None and skipped["grad_norm"] is None and skipped["extra"] == {"norms": [None, 2.0]}
    assert records[3]["ppl"] is None and records[1]["loss"] == 5.0  # finite values are kept as they were


def test_plot_and_info_read_a_run_with_nulls(diverged_run) -> None:
    """fault: a metrics.jsonl with null values; expected: plot takes the numbers only, info lists the run."""
    [run] = load_runs([diverged_run])
    loss = {c.event: c.y.tolist() for c in curves(run, "steps", "loss")}
    assert loss == {"train": [5.0], "valid": [4.0]}
    metrics = describe(diverged_run)["metrics"]
    assert metrics["best_valid_loss"] == {"value": 4.0, "step": 3} and "best_valid_bleu" not in metrics
