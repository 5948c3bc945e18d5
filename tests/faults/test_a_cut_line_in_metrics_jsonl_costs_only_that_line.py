"""A run killed mid-write leaves metrics.jsonl's last line cut; the resumed run and `plot` lose only that line.

The next record was appended onto the cut line, and `plot` then refused the file for good. Now a
resumed run ends the cut line first (mtkit/train/metrics.py), and `plot` reads every whole record
and says how many lines it skipped.
"""

from __future__ import annotations

import json
import logging

from mtkit import plot
from mtkit.train.metrics import MetricsLog


def record(step: int) -> str:
    return json.dumps({"event": "train", "time": 1000.0 + step, "step": step, "loss": 5.0 - step / 10}) + "\n"


def test_a_resume_after_a_cut_line_keeps_every_whole_record(tmp_path, caplog, cli):
    """fault: a cut line at the end of metrics.jsonl, then resume; expected: the cut line skipped with a
    warning, every whole record read, `plot` draws."""
    run = tmp_path / "run"
    run.mkdir()
    cut = record(3)[:20]
    (run / "metrics.jsonl").write_text(record(1) + record(2) + cut)
    with caplog.at_level(logging.WARNING, logger="mtkit"):  # whatever level an earlier CLI run left
        log = MetricsLog(run, enabled=True, max_steps=10, start_step=2)
        log.event("train", step=4, loss=4.6)
        log.event("valid", step=4, loss=4.5, ppl=90.0)
        log.file.close()
    assert "cut short" in caplog.text
    caplog.clear()
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert lines[2] == cut and len(lines) == 5  # the cut line on its own, the new records whole after it
    with caplog.at_level(logging.WARNING, logger="mtkit"):  # whatever level an earlier CLI run left
        steps = [r["step"] for r in plot.read_records(run)]
    assert steps == [1, 2, 4, 4]
    assert "skipped 1 line(s) cut short" in caplog.text
    done = cli("plot", run, "--x", "steps", "--y", "loss", "-o", tmp_path / "curves.svg")
    assert done.returncode == 0 and "skipped 1 line(s)" in done.stderr, done.stderr
