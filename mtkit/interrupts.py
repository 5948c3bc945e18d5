"""Signals as mtkit's commands meet them: SIGTERM as Ctrl-C, and both held back where a pair of files is made.

`terminate_as_interrupt`: a scheduler's preemption or a `kill` (SIGTERM) raises `Terminated`, a
KeyboardInterrupt, so every `finally` cleans up as for Ctrl-C (Python's default is to die at
once and leave temporaries behind). `signals_held`: for the few lines between making a file and
being inside the `try` that removes it (mkstemp's return, a lock and its directory), SIGINT and
SIGTERM wait, and one that came meanwhile is raised as the block ends. `train` handles SIGTERM
its own way (a checkpoint, then exit 143: mtkit/train/signals.py).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM seen as an interrupt, so that every `finally` and `except BaseException` cleans up as for Ctrl-C."""


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM (a scheduler's preemption, `kill`) raises `Terminated` like Ctrl-C does.

    Python's default for SIGTERM is to die at once, leaving temporary files behind. Only the
    main thread can set a handler; elsewhere the block runs unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise Terminated(f"signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


_HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back for the block; one that came meanwhile is raised as the block ends.

    For the few lines that make or remove a pair of files (a lock and its directory): an interrupt
    between the two would leave one behind. Only the main thread receives signals, and only POSIX
    can hold them back; elsewhere the block runs unchanged.
    """
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
