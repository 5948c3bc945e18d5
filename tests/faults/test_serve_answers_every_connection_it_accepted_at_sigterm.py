"""SIGTERM with every connection (`--max-connections`) busy: the connections accepted past the limit, waiting for
room, were closed with no answer; each must be answered (503 with Retry-After) and the busy ones finished."""

from __future__ import annotations

import json
import signal
import socket

import pytest

for _name in ("httpx", "fastapi", "uvicorn"):
    pytest.importorskip(_name)

from tests.support.serve import GATE_ENV, Gate, Server, connect, post_head, wait_until  # noqa: E402

LIMIT = 2
WAITING = 4  # connections past the limit (within its room for refusals), waiting for an idle one


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes; a reset raises (ConnectionResetError)."""
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def test_connections_waiting_for_room_are_answered_503_at_sigterm(cli_model, tmp_path):
    """fault: SIGTERM while connections past `--max-connections` wait for room; expected: each answered 503 with
    Retry-After (none closed unanswered), the busy ones answered 200, exit 0."""
    gate = Gate(tmp_path / "gate")
    gate.path.mkdir()
    gate.open()
    env = {GATE_ENV: str(gate.path), "MTKIT_TEST_ROOM_WAIT_S": "60"}  # they wait for room past the SIGTERM
    server = Server(
        cli_model, tmp_path, "--queue-size", "8", "--batch-wait-ms", "0", "--max-connections", str(LIMIT),
        env=env, module="tests.support.gated",
    )  # fmt: skip
    busy, waiting = [], []
    try:
        gate.close()
        for k in range(LIMIT):
            sock = connect(server)
            sock.sendall(post_head("/translate", json.dumps({"text": [f"a dog {k}"]}).encode()))
            busy.append(sock)
        gate.wait_started(1)
        for k in range(WAITING):
            sock = connect(server)
            sock.sendall(post_head("/translate", json.dumps({"text": [f"a cat {k}"]}).encode()))
            waiting.append(sock)
        wait_until(lambda: "every connection (--max-connections" in server.stderr(), 60, "the waiting connections")
        server.proc.send_signal(signal.SIGTERM)
        answers = [_answer(sock) for sock in waiting]  # b"" (closed unanswered) or a reset is the fault
        for answer in answers:
            assert answer.startswith(b"HTTP/1.1 503 "), answer
            assert b"retry-after: 1\r\n" in answer.lower() and b"shutting down" in answer, answer
        gate.open()
        for sock in busy:
            assert _answer(sock).startswith(b"HTTP/1.1 200 ")
        assert server.proc.wait(timeout=60) == 0
    finally:
        gate.open()
        for sock in busy + waiting:
            sock.close()
        server.stop()
    assert "Traceback" not in server.stderr()
