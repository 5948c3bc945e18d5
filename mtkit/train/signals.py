"""Preemption: SIGTERM (SLURM, Kubernetes, torchrun), SIGHUP (the ssh session or terminal closed) or Ctrl-C
asks training to stop after the current update.

The handler only records the signal; the trainer reads it when it builds the update's
all-reduce, so every rank stops after the same update (one rank's signal is enough), and
then saves checkpoint_last.pt. Validation reads it between its batches (mtkit/train/validation.py):
a preemption's grace (30 s in SLURM, Kubernetes and torchrun) is shorter than a validation with
--valid-bleu on a CPU. A second Ctrl-C raises KeyboardInterrupt at once: atomic writes
(mtkit/atomic.py) remove their temporary file, so nothing is left half-written.

`mtkit train` then exits as a shell reports a process ended by the signal, 128 + its number:
143 after SIGTERM (what a Kubernetes Job or torchrun's agent reads as "terminated": retry, and the
rerun resumes), 129 after SIGHUP, 130 after Ctrl-C. SIGHUP is a stop like SIGTERM (as Slurm's and
nohup's users expect of a job whose terminal went away: keep the work), not Python's default of
dying at once; its own code tells the two apart.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Sequence
from types import FrameType, TracebackType

from mtkit.interrupts import raise_if_terminated

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Their names: the stop reasons that save at once, without a last validation; a rank that got several says the first.
SIGNAL_STOPS = ("SIGTERM", "SIGINT", "SIGHUP")
EXIT_CODES = {name: 128 + signal.Signals[name] for name in SIGNAL_STOPS}  # 143, 130 and 129: the shells' codes


def agreed_signal(flags: Sequence[float]) -> str:
    """The stop signal from `StopRequests.flags()` summed over every rank ("" when none): Ctrl-C wins, as someone
    is at the keyboard, then SIGTERM (a scheduler's), then SIGHUP."""
    summed = dict(zip(SIGNAL_STOPS, flags, strict=True))
    return next((name for name in ("SIGINT", "SIGTERM", "SIGHUP") if summed[name] > 0), "")


class StopRequests:
    """A context that turns SIGTERM/SIGINT/SIGHUP into a request (`received`), restoring the old handlers on exit."""

    def __init__(self) -> None:
        self.received = ""  # "SIGTERM", "SIGINT" or "SIGHUP" once one arrived
        self._previous: dict[int, object] = {}

    def flags(self) -> list[float]:
        """One number per SIGNAL_STOPS, 1.0 for the one received: summed over ranks, `agreed_signal` reads them."""
        return [float(self.received == name) for name in SIGNAL_STOPS]

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received and signum == signal.SIGINT:
            raise KeyboardInterrupt  # the second Ctrl-C: stop now
        if not self.received:
            self.received = signal.Signals(signum).name

    def __enter__(self) -> StopRequests:
        # A SIGTERM/SIGHUP before now (while the run was set up) whose exception C code swallowed: stop as if raised.
        raise_if_terminated()
        if threading.current_thread() is threading.main_thread():  # only the main thread may set handlers
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()
