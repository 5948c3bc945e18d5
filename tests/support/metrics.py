"""RUN/metrics.jsonl as tests read it: through `mtkit.plot.read_records`, the reader under `mtkit plot`.

One reader means that a record the trainer writes and the plot cannot read fails a test, and that a
run killed mid-line (its last line cut short) reads as it does for users: without that line.
`read_metrics`, the plot's entry, also refuses a run with nothing to plot yet (no training or
validation record), which a run stopped at its first update is: tests read its records all the same.
"""

from __future__ import annotations

from pathlib import Path

from mtkit.plot import read_records


def records(run: Path) -> list[dict]:
    """Every record of RUN/metrics.jsonl, oldest first; a missing or damaged file fails the test."""
    return read_records(run)


def records_so_far(run: Path) -> list[dict]:
    """The records of a run that may not have written its metrics.jsonl yet (none until it has)."""
    return read_records(run) if (run / "metrics.jsonl").is_file() else []
