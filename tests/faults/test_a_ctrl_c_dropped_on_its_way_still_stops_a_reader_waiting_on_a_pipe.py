"""A Ctrl-C whose KeyboardInterrupt was dropped on its way (raised inside a `__del__`, where Python prints "Exception
ignored" and goes on) still stops `translate` reading a pipe that stays open: the reader raises the recorded
interrupt before it waits for the next line, instead of waiting for ever (mtkit/interrupts.py)."""

from __future__ import annotations

import os
import signal

import pytest

from mtkit.interrupts import terminate_as_interrupt
from mtkit.textio import read_lines_lenient

# A shell starts a background job with Ctrl-C ignored (SIG_IGN), and Python then leaves it so: nothing to wrap.
CTRL_C_IS_PYTHONS = signal.getsignal(signal.SIGINT) is signal.default_int_handler
needs_ctrl_c = pytest.mark.skipif(not CTRL_C_IS_PYTHONS, reason="SIGINT is ignored in this process (a background job)")


class DropsItsStop:
    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        signal.raise_signal(self.signum)  # the handler's exception is raised here, printed and dropped


def timed_out(signum: int, frame: object) -> None:
    raise TimeoutError("the reader waited for a line that never came")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the drop this test is about
@pytest.mark.parametrize("signum", [pytest.param(signal.SIGINT, marks=needs_ctrl_c), signal.SIGTERM])
def test_a_dropped_stop_is_raised_before_the_reader_waits(signum: int) -> None:
    read, write = os.pipe()  # the writer stays open and writes nothing: a read would wait for ever
    holder = DropsItsStop(signum)
    before = signal.signal(signal.SIGALRM, timed_out)
    signal.alarm(10)
    try:
        with open(read, "rb") as pipe, terminate_as_interrupt():
            del holder  # the stop's exception is lost here
            with pytest.raises(KeyboardInterrupt) as raised:
                next(read_lines_lenient(pipe))
        assert getattr(raised.value, "signum", signal.SIGINT) == signum  # Ctrl-C as itself, SIGTERM as Terminated
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
        os.close(write)


@needs_ctrl_c
def test_outside_a_command_ctrl_c_is_left_to_python() -> None:
    """The handler is mtkit's only inside the block, and only where SIGINT had Python's own."""
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with terminate_as_interrupt():
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):  # and a Ctrl-C still raises at once, as Python's would
        with terminate_as_interrupt():
            signal.raise_signal(signal.SIGINT)
