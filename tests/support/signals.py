"""A signal that lands at an exact line: the races a Ctrl-C or a scheduler's SIGTERM can hit, made repeatable."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any


def signal_self_after(real: Callable[..., Any], sig: signal.Signals) -> Callable[..., Any]:
    """`real`, then `sig` to this process: its handler runs at the first line after the call returns."""

    def call(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        os.kill(os.getpid(), sig)
        return result

    return call
