"""SIGHUP to `mtkit serve` (its terminal or ssh session closes): the requests in flight are answered, exit 0.

uvicorn handles SIGINT and SIGTERM only, so SIGHUP killed the process and requests in flight got
empty replies. Now it drains as for SIGTERM (mtkit/serve/server.py).
"""

from __future__ import annotations

import signal
import threading

import pytest

for _name in ("httpx", "fastapi", "uvicorn"):
    pytest.importorskip(_name)

from tests.support.serve import gated_server, wait_until  # noqa: E402


def test_a_hang_up_answers_the_request_in_flight_then_exits_0(cli_model, tmp_path):
    """fault: SIGHUP to `serve` with a request in flight; expected: the request answered, exit 0."""
    server, gate = gated_server(cli_model, tmp_path)
    gate.close()
    got: list = []
    request = threading.Thread(target=lambda: got.append(server.post("/translate", json={"text": ["green dog"]})))
    request.start()
    try:
        gate.wait_started(1)
        server.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "SIGHUP" in server.stderr(), 60, "the hang-up to be logged")
        gate.open()
        request.join(60)
        assert got and got[0].status_code == 200 and len(got[0].json()["translations"]) == 1
        assert server.proc.wait(timeout=60) == 0
    finally:
        gate.open()
        server.stop()
    assert "Traceback" not in server.stderr()
