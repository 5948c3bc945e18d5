"""Signals as mtkit's commands meet them: SIGTERM and SIGHUP as Ctrl-C, held back where a pair of files is made.

`terminate_as_interrupt`: a scheduler's preemption or a `kill` (SIGTERM), or the hang-up of the
terminal or ssh session the command runs in (SIGHUP), raises `Terminated`, a KeyboardInterrupt,
so every `finally` cleans up as for Ctrl-C (Python's default is to die at once and leave
temporaries behind); `mtkit` then exits 128 + the signal's number, as a shell reports it.
`signals_held`: for the few lines between making a file and being inside the `try` that removes it
(mkstemp's return, a lock and its directory), SIGINT, SIGTERM and SIGHUP wait, and one that came
meanwhile is raised as the block ends. `train` handles them its own way (a checkpoint, then exit
143 or 129: mtkit/train/signals.py), `serve` too (a drain).

An exception a handler raises can be lost: Python runs the handler at the next bytecode, which may be
inside Python code that C code called and whose error that C code clears (measured: a Cython module's
initialisation, importing `numpy.random`, calls `ABCMeta.__subclasscheck__` and drops what it raised).
So the handler also records the signal, and `raise_if_terminated` raises it again at a point of our
choosing: train calls it where its own handlers take over, so a lost SIGTERM cannot let a run go on. Ctrl-C
(SIGINT) is recorded the same way within the block (Python's own handler, which raises KeyboardInterrupt, is
wrapped): its exception is lost as easily (raised inside a `__del__` or a weakref callback, Python prints
"Exception ignored" and goes on), and `translate` reading its next line from a pipe would then wait for ever;
the reader (mtkit/textio.py) calls `raise_if_terminated` before each line it waits for. Where C code
raises an error of its own instead (a Cython module's import: an ImportError), `mtkit`'s entry point asks
`stop_received` and ends the command as the stop it was, in one sentence.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

# The signals that end a command as Ctrl-C does: a scheduler's or `kill`'s, and a closed terminal's.
TERMINATING = (signal.SIGTERM, signal.SIGHUP)

# The terminating signal `terminate_as_interrupt`'s handler saw (0: none yet), whether it saw Ctrl-C, and how many
# blocks are open.
_received = 0
_interrupted = False
_depth = 0


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP seen as an interrupt, so that every `finally` and `except BaseException` cleans up as
    for Ctrl-C."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        self.signum = int(signum)
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"signal {self.signal_name}")


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM (a scheduler's preemption, `kill`) or SIGHUP raises `Terminated` like Ctrl-C.

    Python's default for SIGTERM is to die at once, leaving temporary files behind. Only the
    main thread can set a handler; elsewhere the block runs unchanged.
    """
    global _received, _interrupted, _depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        global _received
        _received = _received or signum  # kept in case C code clears the exception below (`raise_if_terminated`)
        raise Terminated(signum)

    def ctrl_c(signum: int, frame: object) -> None:
        global _interrupted
        _interrupted = True  # kept likewise: a KeyboardInterrupt raised in a `__del__` is printed and dropped
        raise KeyboardInterrupt

    if _depth == 0:
        _received, _interrupted = 0, False  # a new command (tests run several in one process)
    _depth += 1
    handlers = {signum: interrupt for signum in TERMINATING}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # a handler of the caller's own stays
        handlers[signal.SIGINT] = ctrl_c
    previous = {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}
    try:
        yield
    finally:
        _depth -= 1
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if _depth == 0:
            _received, _interrupted = 0, False  # outside every block no signal is this module's to raise


def stop_received() -> int:
    """The SIGTERM or SIGHUP the handler saw within the current command (0: none): what an error that C code
    raised in place of its exception meant (a Cython module's import turns it into an ImportError)."""
    return _received


def raise_if_terminated() -> None:
    """Raise `Terminated` again for a SIGTERM or SIGHUP the handler saw, or KeyboardInterrupt for a Ctrl-C, in case
    its exception was lost on the way.

    The handler's exception can be cleared by C code it was raised under (the module's docstring): call this
    where a command hands the signals to handlers of its own, before work that must not start after a stop, or
    before waiting for input that may never come.
    """
    if _received:
        raise Terminated(_received)
    if _interrupted:
        raise KeyboardInterrupt


_HELD_SIGNALS = (signal.SIGINT, *TERMINATING)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back for the block; the first that came meanwhile is delivered as it ends.

    For the few lines between making a file and being inside the `try` that removes it. Held in
    Python, not with `pthread_sigmask`: a mask holds a signal back from this thread only, and the
    kernel hands a process's signal to any other thread (torch's, a server's), after which Python
    raises it in the main thread at once. Here the handlers are swapped for one that notes the
    signal, and the noted one is raised again (`signal.raise_signal`) to the handler that was in
    place before, so a command's own handling (train's stop-after-this-update) is kept. Only the
    main thread can set handlers; elsewhere, or where a handler was not set from Python, the block
    runs unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in _HELD_SIGNALS}
    if any(handler is None for handler in previous.values()):
        yield
        return
    pending: list[int] = []

    def note(signum: int, frame: object) -> None:
        pending.append(signum)

    for signum in _HELD_SIGNALS:
        signal.signal(signum, note)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if pending:
            signal.raise_signal(pending[0])
