"""What the user sees of a run: RUN/metrics.jsonl, log lines, and a live progress line on a terminal.

Every value logged goes to metrics.jsonl (one strict JSON object a line, with its `event`:
a NaN or infinite value is written as null); the
same values become a plain log line when stderr is not a terminal, and the postfix of a
tqdm bar (on stderr) when it is. Only rank 0 reports.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

FORMATS = {
    "loss": "{:.3f}",
    "nll": "{:.3f}",
    "ppl": "{:.2f}",
    "lr": "{:.3g}",
    "tokens_per_s": "{:,.0f}",
    "pad_eff": "{:.1%}",
    "s_per_update": "{:.3f}",
    "grad_norm": "{:.3f}",
}


def _fmt(key: str, value: Any) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return FORMATS.get(key, "{:.4g}").format(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}" if key in ("params", "tokens", "sentences") else str(value)
    return str(value)


def finite(value: Any) -> Any:
    """`value` with every NaN or infinite float made None (JSON null), in lists and dicts too.

    Python's json writes NaN and Infinity, which are not JSON: jq, JavaScript and pandas' strict
    readers reject the whole file. A diverged loss is still plain to see: it is null, and the
    `nonfinite` count beside it says how many updates were skipped.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    if isinstance(value, np.generic) and np.issubdtype(type(value), np.floating):
        return finite(float(value))
    return value


def json_line(record: dict[str, Any]) -> str:
    """One metrics.jsonl line: strict JSON (allow_nan=False holds `finite` to its word)."""
    return json.dumps(finite(record), default=str, allow_nan=False) + "\n"


def end_cut_line(path: Path) -> None:
    """A run killed mid-write leaves the file's last line cut short: end it, so the next record starts a line.

    Appended onto it, the next record would be lost with it (`plot` refused the file for good); on a line
    of its own, the cut one is skipped by `plot` and `info` with a warning, and every whole record is read.
    """
    try:
        with open(path, "rb+") as f:
            if f.seek(0, os.SEEK_END) == 0:
                return
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return
            f.write(b"\n")
    except FileNotFoundError:
        return
    logger.warning("%s ended in a line cut short (a kill mid-write); it is set on a line of its own and skipped.", path)


class MetricsLog:
    """Append-only metrics.jsonl plus logging; a tqdm bar over the steps when stderr is a terminal."""

    def __init__(self, run_dir: Path, enabled: bool, max_steps: int, start_step: int, tensorboard: bool = False):
        self.enabled = enabled
        self.path = run_dir / "metrics.jsonl"
        self.tb = None
        if enabled and tensorboard:  # first: a missing extra is said before a file is opened
            from mtkit.train.tensorboard import TensorBoardLog

            self.tb = TensorBoardLog(run_dir)
        if enabled:
            end_cut_line(self.path)
        self.file = open(self.path, "a", encoding="utf-8") if enabled else None
        self.bar = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(
                total=max_steps,
                initial=start_step,
                file=sys.stderr,
                unit="upd",
                dynamic_ncols=True,
                smoothing=0.05,
                desc="train",
            )

    def event(self, event: str, quiet_on_tty: bool = False, level: int = logging.INFO, **values: Any) -> None:
        """One record: metrics.jsonl always; a log line unless a live bar already shows it."""
        if not self.enabled:
            return
        record = {"event": event, "time": round(time.time(), 3), **values}
        self.file.write(json_line(record))
        self.file.flush()
        if self.tb is not None:
            self.tb.write(record)
        if self.bar is not None and quiet_on_tty:
            shown = {
                k: _fmt(k, v) for k, v in values.items() if k in ("epoch", "loss", "lr", "tokens_per_s", "pad_eff")
            }
            self.bar.set_postfix(shown, refresh=False)
            return
        text = " | ".join(f"{k} {_fmt(k, v)}" for k, v in values.items())
        if self.bar is not None and level <= logging.INFO:
            self.bar.write(f"{event} | {text}", file=sys.stderr)
        else:
            logger.log(level, "%s | %s", event, text)

    def advance(self, steps: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(steps)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.file is not None:
            self.file.close()
        if self.tb is not None:
            self.tb.close()


class Window:
    """Sums between two log lines (host numbers only: they arrive with the update's one sync)."""

    def __init__(self) -> None:
        self.loss = self.nll = self.seconds = 0.0
        self.tgt = self.real = self.padded = self.updates = 0
        self.norm_sum, self.norms = 0.0, 0

    def add(
        self,
        loss: float,
        nll: float,
        tgt: int,
        real_and_padded: np.ndarray,
        seconds: float,
        grad_norm: float = math.nan,
    ) -> None:
        if math.isfinite(loss):
            self.loss, self.nll, self.tgt = self.loss + loss, self.nll + nll, self.tgt + tgt
        if math.isfinite(grad_norm):
            self.norm_sum, self.norms = self.norm_sum + grad_norm, self.norms + 1
        self.real += int(real_and_padded[0])
        self.padded += int(real_and_padded[1])
        self.seconds += seconds
        self.updates += 1

    def grad_norm(self) -> float:
        """The mean gradient norm (before clipping) of the window's finite updates (fairseq's gnorm)."""
        return self.norm_sum / self.norms if self.norms else math.nan
