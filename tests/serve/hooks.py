"""A decoder wrapper for the server tests, put in place by tests/serve/gated.py (a monkeypatch, no hook in mtkit).

`gated` makes the real server's decoder deterministic to test against: each batch drops a
`started-*` file in $MTKIT_TEST_GATE, then waits until the file `open` is there; a batch
with a line containing FAIL raises, as a decoding error would.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

GATE_ENV = "MTKIT_TEST_GATE"
WAIT_S = 60  # a test that forgets to open the gate fails instead of hanging


def gated(decode: Callable[..., Any]) -> Callable[..., Any]:
    gate = Path(os.environ[GATE_ENV])

    def wrapped(lines: list[str], config: Any) -> Any:
        (gate / f"started-{uuid.uuid4().hex}").touch()
        deadline = time.monotonic() + WAIT_S
        while not (gate / "open").exists():
            if time.monotonic() > deadline:
                raise TimeoutError("the test gate was never opened")
            time.sleep(0.01)
        if any("FAIL" in line for line in lines):
            raise RuntimeError("injected decoding failure")
        return decode(lines, config)

    return wrapped


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `condition` until it holds; fail (not hang) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)
