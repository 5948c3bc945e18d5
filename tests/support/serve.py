"""A real `mtkit serve` in a subprocess on 127.0.0.1 with an ephemeral port, and the gate its decoder can wait at.

`Server` is the command as users start it (stderr read for the port and at the end); with
`gated_server` it runs as `python -m tests.support.gated serve ...`, whose decoder is wrapped by
`gated` (a monkeypatch in that process, no hook in mtkit). The HTTP helpers need httpx.

`gated` makes the real server's decoder deterministic to test against: each batch drops a
`started-*` file in $MTKIT_TEST_GATE, then waits until the file `open` is there; a batch
with a line containing FAIL raises, as a decoding error would.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.cli import ROOT, run_cli

GATE_ENV = "MTKIT_TEST_GATE"
WAIT_S = 60  # a test that forgets to open the gate fails instead of hanging
START_S = 120  # importing torch on a busy CI machine can take a while


def gated(decode: Callable[..., Any]) -> Callable[..., Any]:
    gate = Path(os.environ[GATE_ENV])

    def wrapped(lines: list[str], config: Any, *rest: Any) -> Any:
        (gate / f"started-{uuid.uuid4().hex}").touch()
        deadline = time.monotonic() + WAIT_S
        while not (gate / "open").exists():
            if time.monotonic() > deadline:
                raise TimeoutError("the test gate was never opened")
            time.sleep(0.01)
        if any("FAIL" in line for line in lines):
            raise RuntimeError("injected decoding failure")
        return decode(lines, config, *rest)

    return wrapped


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `condition` until it holds; fail (not hang) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


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
        """`module`: tests.support.gated for a gated decoder; `headers`: sent with every request (an API key)."""
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


class Gate:
    """The directory `gated` watches: count the batches started, open the gate."""

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


def connect(server: Server) -> socket.socket:
    """A raw TCP connection to the server, for clients that misbehave below HTTP (idle, slow, leaving)."""
    host, port = server.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=60)


def post_head(path: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    """A whole POST request of `body` as JSON, as raw bytes."""
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def gated_server(model: Path, tmp: Path, *args: str) -> tuple[Server, Gate]:
    """A server whose decoder waits for the gate: queue size 1, no batching window."""
    gate = Gate(tmp / "gate")
    gate.path.mkdir()
    gate.open()  # open while starting up
    env = {GATE_ENV: str(gate.path)}
    srv = Server(model, tmp, "--queue-size", "1", "--batch-wait-ms", "0", *args, env=env, module="tests.support.gated")
    return srv, gate


def keyed_server(model: Path, tmp: Path, keys: str, *args: str) -> Server:
    """A server of the `--api-keys` file `keys` (its lines, written to TMP/keys readable by its owner alone, as
    serve asks), for the APIs whose clients send a key."""
    path = tmp / "keys"
    path.write_text(keys, "utf-8")
    path.chmod(0o600)
    return Server(model, tmp, "--languages", "en-de", "--api-keys", str(path), *args)


def translated(model: Path, lines: list[str]) -> tuple[list[str], list[float]]:
    """What `mtkit translate -m MODEL --scores` says for `lines`: the translations and their scores, to compare
    with a server's answers (each test chooses the scores' tolerance)."""
    result = run_cli("translate", "-m", model, "--scores", input="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr
    pairs = [line.rsplit("\t", 1) for line in result.stdout.splitlines()]
    return [text for text, _ in pairs], [float(score) for _, score in pairs]
