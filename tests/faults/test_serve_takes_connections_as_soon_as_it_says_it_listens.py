"""`mtkit serve` logs "listening on http://HOST:PORT" before uvicorn starts; its socket was bound but not listening
until then, so a client that connected on that line (a test harness, a probe) on a loaded machine was refused.
The socket listens before the line is logged: such a client waits in the backlog and is served."""

from __future__ import annotations

import socket

import pytest

for _name in ("fastapi", "uvicorn"):
    pytest.importorskip(_name)

from mtkit.serve import server  # noqa: E402
from mtkit.serve.service import ServeSettings  # noqa: E402


def test_a_client_that_connects_before_uvicorn_runs_is_not_refused(monkeypatch):
    """fault: a connection between "listening on" and uvicorn's start; expected: accepted into the backlog."""
    connected: list[bool] = []

    def run(self, sockets=None):  # noqa: ANN001, ANN202 - uvicorn's run, replaced: a client connects first
        address = sockets[0].getsockname()[:2]
        try:
            with socket.create_connection(address, timeout=5):
                connected.append(True)
        except ConnectionRefusedError:
            connected.append(False)

    monkeypatch.setattr("uvicorn.Server.run", run)
    server.serve(ServeSettings(models=("fake.pt",)), "127.0.0.1", 0)
    assert connected == [True]
