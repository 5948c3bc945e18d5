"""Signals held back over the lines that make a file: delivered afterwards, to the handler that was there."""

import os
import signal
import time

from mtkit.interrupts import signals_held
from tests.support.signals import another_thread


def test_a_held_signal_reaches_the_commands_own_handler_once_the_block_ends():
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))  # as train's stop request
    try:
        with another_thread(), signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            assert seen == []
        assert seen == [signal.SIGTERM]  # the first one noted, delivered once
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, previous)
