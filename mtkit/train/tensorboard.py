"""`train --tensorboard`: every number of metrics.jsonl also as a TensorBoard scalar under RUN/tb/.

Tags are `EVENT/KEY` (train/loss, valid/bleu, start/params ...), each at the record's step
(0 for records without one) and with the record's own wall time, so TensorBoard's
"relative" and "wall" axes show the same clock as `mtkit plot --x minutes`. The writer is
torch.utils.tensorboard's SummaryWriter, which needs the `tensorboard` package (the extra).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from mtkit.errors import MtkitError

SKIPPED = ("event", "time", "step")  # the tag's prefix, its wall time and its step: not scalars of their own


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The record's finite numbers (booleans as 0/1), keyed by their TensorBoard tag."""
    out = {}
    for key, value in record.items():
        if key in SKIPPED or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value):
            out[f"{record['event']}/{key}"] = float(value)
    return out


class TensorBoardLog:
    """A SummaryWriter on RUN/tb/ that takes metrics.jsonl records as they are written."""

    def __init__(self, run_dir: Path) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise MtkitError("--tensorboard needs the tensorboard package: pip install 'mtkit[tensorboard]'.") from None
        self.writer = SummaryWriter(log_dir=str(run_dir / "tb"))

    def write(self, record: dict[str, Any]) -> None:
        step = int(record.get("step", 0) or 0)
        for tag, value in scalars(record).items():
            self.writer.add_scalar(tag, value, global_step=step, walltime=record["time"])
        self.writer.flush()  # a record a log line: seconds apart, and the run may be killed at any time

    def close(self) -> None:
        self.writer.close()
