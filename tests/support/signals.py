"""A signal that lands at an exact line: the races a Ctrl-C or a scheduler's SIGTERM can hit, made repeatable."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any


def signal_self_after(real: Callable[..., Any], sig: signal.Signals) -> Callable[..., Any]:
    """`real`, then `sig` to this process: its handler runs at the first line after the call returns.

    The call then waits a little before it returns, so that the signal has surely arrived, in
    whichever thread the kernel handed it to, by the time the caller's next line runs.
    """

    def call(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        os.kill(os.getpid(), sig)
        time.sleep(0.05)
        return result

    return call


@contextlib.contextmanager
def another_thread() -> Iterator[None]:
    """A second thread alive for the block, as torch's or a server's are in a real command.

    The kernel hands a signal sent to the process to any thread that does not block it, so a
    way of holding signals back that works only for the calling thread fails here.
    """
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
