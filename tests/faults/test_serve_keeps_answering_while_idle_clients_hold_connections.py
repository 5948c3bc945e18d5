"""Idle and slow connections to `mtkit serve`: limited and timed out, as nginx does; /health answers all along.

Nothing limited connections or timed out a request that never came whole: 400 idle sockets
under a 256-descriptor limit made /health time out, and asyncio logged a traceback per
refused accept. Now past --max-connections the idle connections are closed, oldest first, a
request must arrive within --read-timeout (408 for a head left unfinished), and each cause is
one log line (mtkit/serve/connections.py).
"""

from __future__ import annotations

import pytest

for _name in ("httpx", "fastapi", "uvicorn"):
    pytest.importorskip(_name)

from tests.support.serve import Server, connect  # noqa: E402

IDLE = 40


@pytest.fixture(scope="module")
def server(cli_model, tmp_path_factory):
    srv = Server(cli_model, tmp_path_factory.mktemp("serve-idle"), "--max-connections", "8", "--read-timeout", "1")
    yield srv
    assert srv.stop() == 0


def test_idle_sockets_past_the_limit_leave_room_for_health_and_good_clients(server):
    """fault: many idle connections to `serve`; expected: /health and a translation answered, one log line per
    cause, no traceback."""
    idle = [connect(server) for _ in range(IDLE)]
    try:
        for _ in range(3):
            assert server.get("/health").status_code == 200
            assert server.post("/translate", json={"text": ["green dog"]}).status_code == 200
        closed = sum(1 for sock in idle if sock.recv(1) == b"")  # blocks until the server closes it (timeout 60 s)
        assert closed == IDLE
    finally:
        for sock in idle:
            sock.close()
    log = server.stderr()
    assert "Traceback" not in log, log
    assert log.count("closing idle ones") <= 1 and log.count("no whole request") <= 1, log


def test_a_head_left_unfinished_gets_408_and_the_connection_closed(server):
    """fault: a client sends half a request head and waits (slowloris); expected: 408 after --read-timeout,
    the connection closed."""
    with connect(server) as sock:
        sock.sendall(b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: applica")
        answer = b""
        while chunk := sock.recv(65536):  # until the server closes it (each recv waits 60 s at most)
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b'"error"' in answer
