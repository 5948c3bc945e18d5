"""A real `mtkit serve` in a subprocess on 127.0.0.1 with an ephemeral port, and HTTP helpers to talk to it.

The HTTP test modules skip themselves without the serve extra (fastapi, uvicorn) and httpx.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.serve.hooks import GATE_ENV, wait_until

START_S = 120  # importing torch on a busy CI machine can take a while


class Server:
    """`python -m mtkit serve ...`; its stderr goes to a file, read for the port and at the end."""

    def __init__(
        self,
        model: Path,
        tmp: Path,
        *args: str,
        env: dict[str, str] | None = None,
        module: str = "mtkit",
        headers: dict[str, str] | None = None,
    ) -> None:
        """`module`: tests.serve.gated for a gated decoder; `headers`: sent with every request (an API key)."""
        self.model, self.log, self.headers = model, tmp / "serve.log", headers or {}
        full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", module, "serve", "-m", str(model), "--port", "0", "--threads", "1", *args],
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=full_env,
            )
        self.url = self._wait_for_port()
        self._wait_ready()

    def _wait_for_port(self) -> str:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if match := re.search(r"listening on (http://127\.0\.0\.1:\d+)", self.stderr()):
                return match.group(1)
            if self.proc.poll() is not None:
                raise AssertionError(f"mtkit serve exited with {self.proc.returncode}: {self.stderr()}")
            time.sleep(0.05)
        raise AssertionError(f"mtkit serve did not start: {self.stderr()}")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if self.get("/health").status_code == 200:
                return
            time.sleep(0.05)
        raise AssertionError(f"mtkit serve never became ready: {self.stderr()}")

    def stderr(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def get(self, path: str, **kwargs: Any) -> Any:
        import httpx

        return httpx.get(self.url + path, timeout=60, **{"headers": self.headers, **kwargs})

    def post(self, path: str, **kwargs: Any) -> Any:
        import httpx

        return httpx.post(self.url + path, timeout=60, **{"headers": self.headers, **kwargs})

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def server(cli_model, tmp_path_factory):
    """One plain server per test module: small request limits, a 20 ms batching window."""
    srv = Server(
        cli_model, tmp_path_factory.mktemp("serve"), "--batch-wait-ms", "20", "--max-lines", "8", "--max-chars", "400"
    )
    yield srv
    srv.stop()


class Gate:
    """The directory `tests.serve.hooks.gated` watches: count the batches started, open the gate."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def close(self) -> None:
        for p in self.path.iterdir():
            p.unlink()

    def open(self) -> None:
        (self.path / "open").touch()

    def started(self) -> int:
        return sum(1 for p in self.path.iterdir() if p.name.startswith("started-"))

    def wait_started(self, n: int, timeout: float = 60) -> None:
        wait_until(lambda: self.started() >= n, timeout, f"{n} batch(es) to start decoding")


def gated_server(model: Path, tmp: Path, *args: str) -> tuple[Server, Gate]:
    """A server whose decoder waits for the gate: queue size 1, no batching window."""
    gate = Gate(tmp / "gate")
    gate.path.mkdir()
    gate.open()  # open while starting up
    env = {GATE_ENV: str(gate.path)}
    srv = Server(model, tmp, "--queue-size", "1", "--batch-wait-ms", "0", *args, env=env, module="tests.serve.gated")
    return srv, gate
