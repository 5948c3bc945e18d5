"""Past `serve --max-connections`: every request answered or refused with 503 and Retry-After, never reset.

Two faults of the connection limit (mtkit/serve/connections.py). A connection whose request had
not been read yet, or a kept-alive client between two requests, counted as idle and was closed at
the limit, which resets the request the client had sent (about 216 of 240 under 48 clients against
24 connections), `/health` probes too. And each time every connection was busy, asyncio's accept
loop counted a connection "to be refused" although none was waiting: the count leaked, so an idle
server went on answering 503 for ever.
"""

from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

for _name in ("httpx", "fastapi", "uvicorn"):
    pytest.importorskip(_name)

import h11  # noqa: E402

from mtkit.serve import connections  # noqa: E402
from tests.support.serve import connect, gated_server, post_head, wait_until  # noqa: E402

LIMIT = 2
PAST = 6  # requests sent while all LIMIT connections are busy (within REFUSE_ROOM)


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes; a reset raises (ConnectionResetError)."""
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def test_requests_past_the_limit_get_503_with_retry_after_and_health_is_answered(cli_model, tmp_path):
    """fault: clients past `serve --max-connections` while every connection is busy; expected: each request
    answered 503 with Retry-After (no reset), /health answered 200."""
    server, gate = gated_server(cli_model, tmp_path, "--queue-size", "8", "--max-connections", str(LIMIT))
    busy = []
    try:
        gate.close()
        for k in range(LIMIT):  # every connection busy with a request the decoder holds
            sock = connect(server)
            sock.sendall(post_head("/translate", json.dumps({"text": [f"a dog {k}"]}).encode()))
            busy.append(sock)
        gate.wait_started(1)
        wait_until(lambda: server.get("/health").status_code == 200, 60, "/health answered while busy")
        past = []
        for k in range(PAST):
            sock = connect(server)
            sock.sendall(post_head("/translate", json.dumps({"text": [f"a cat {k}"]}).encode()))
            past.append(sock)
        answers = [_answer(sock) for sock in past]  # ConnectionResetError here is the fault
        for answer in answers:
            assert answer.startswith(b"HTTP/1.1 503 "), answer
            assert b"retry-after: 1\r\n" in answer.lower(), answer
        assert all(server.get("/health").status_code == 200 for _ in range(3))
        gate.open()
        for sock in busy:
            assert _answer_once(sock).startswith(b"HTTP/1.1 200 ")
    finally:
        gate.open()
        for sock in busy:
            sock.close()
        assert server.stop() == 0
    assert "Traceback" not in server.stderr()


def _answer_once(sock: socket.socket) -> bytes:
    """One answer on a kept-alive connection (read up to the end of its head and body)."""
    got = b""
    while b"\r\n\r\n" not in got:
        got += sock.recv(65536)
    head, _, body = got.partition(b"\r\n\r\n")
    length = int(
        next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    )
    while len(body) < length:
        body += sock.recv(65536)
    return got


def test_an_idle_server_answers_everything_after_refusing_while_busy(cli_model, tmp_path):
    """fault: `serve --max-connections N` refuses connections while all N are busy, then goes idle; expected: the
    idle server answers every /health and translation (the refusals left no count behind)."""
    server, gate = gated_server(cli_model, tmp_path, "--queue-size", "8", "--max-connections", str(LIMIT))
    try:
        gate.close()
        with ThreadPoolExecutor(LIMIT) as pool:
            held = [pool.submit(server.post, "/translate", json={"text": [f"a dog {k}"]}) for k in range(LIMIT)]
            gate.wait_started(1)
            for _ in range(PAST):
                server.get("/health")  # over the limit: accepted to be refused (answered, for /health)
            gate.open()
            assert [f.result().status_code for f in held] == [200] * LIMIT
        time.sleep(0.2)  # the held connections closed: the server is idle
        assert [server.get("/health").status_code for _ in range(PAST)] == [200] * PAST
        assert [server.post("/translate", json={"text": ["a cat"]}).status_code for _ in range(PAST)] == [200] * PAST
    finally:
        gate.open()
        assert server.stop() == 0


# --------------------------------------------------------------------------- the policy, without a server
class _Busy:
    """A connection answering a request."""

    cycle = SimpleNamespace(response_complete=False)
    conn = SimpleNamespace(their_state=h11.DONE)
    transport = SimpleNamespace(is_closing=lambda: False)


def _limits_at_the_limit() -> connections.ConnectionLimits:
    return connections.ConnectionLimits(max_connections=1, accepted=1, protocols={_Busy()})


def test_an_accept_with_nobody_waiting_counts_no_connection_to_refuse():
    limits = _limits_at_the_limit()
    with socket.create_server(("127.0.0.1", 0)) as plain:
        plain.setblocking(False)
        listening = connections.ListeningSocket.wrap(plain, limits)
        for _ in range(5):  # asyncio's accept loop: until BlockingIOError
            with pytest.raises(BlockingIOError):
                listening.accept()
        assert limits.refusing == set() and limits.accepted == 1
        listening.close()


def _protocol(sock: socket.socket, since: float) -> SimpleNamespace:
    transport = SimpleNamespace(get_extra_info=lambda name: sock if name == "socket" else None)
    return SimpleNamespace(cycle=None, conn=SimpleNamespace(their_state=h11.IDLE), _since=since, transport=transport)


def test_a_connection_with_a_request_unread_or_a_byte_just_received_is_not_idle():
    server_side, client_side = socket.socketpair()
    with server_side, client_side:
        now = time.monotonic()
        quiet = now - 2 * connections.IDLE_AFTER_S
        assert connections._idle(_protocol(server_side, quiet), now)  # nothing sent for a while: idle
        assert not connections._idle(_protocol(server_side, now), now)  # a request maybe on its way
        client_side.sendall(b"GET /health HTTP/1.1\r\n")
        wait_until(lambda: connections._unread(_protocol(server_side, 0).transport) > 0, 10, "bytes to arrive")
        assert not connections._idle(_protocol(server_side, quiet), now)  # its request waits unread


def test_health_probes_are_told_from_other_requests():
    assert connections._health_probe(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert connections._health_probe(b"GET /health?x=1 HTTP/1.1\r\n\r\n")
    assert not connections._health_probe(b"POST /health HTTP/1.1\r\n\r\n")
    assert not connections._health_probe(b"GET /healthz HTTP/1.1\r\n\r\n")
