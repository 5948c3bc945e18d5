"""Rows 1-3 of issue 37 against the real `mtkit serve` process: what uvicorn and the CLI add, over real sockets.

The in-process tests beside this one check each rule; this one checks that the command wires
them (--api-key-file, --allow-origin), that a client leaving mid-upload or sending a broken
Content-Length is one quiet log line, and that the log holds no traceback at the end.
"""

from __future__ import annotations

import socket

import pytest

for _name in ("httpx", "fastapi", "uvicorn"):
    pytest.importorskip(_name)

from tests.support.serve import Server, wait_until  # noqa: E402

KEY = "a-key-for-the-test"
APP = "https://app.example.org"


@pytest.fixture(scope="module")
def server(cli_model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve-guarded")
    (tmp / "key").write_text(KEY + "\n")
    env = {"MTKIT_SERVE_API_KEY": "not-this-one"}  # --api-key-file wins
    srv = Server(
        cli_model, tmp, "--api-key-file", str(tmp / "key"), "--allow-origin", APP, env=env, headers={"X-API-Key": KEY}
    )
    yield srv
    assert srv.stop() == 0
    assert "Traceback" not in srv.stderr(), srv.stderr()


def raw(server: Server, data: bytes, read: bool = True) -> bytes:
    """Send bytes on a fresh connection; the answer's first line (or nothing when `read` is False)."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(data)
        if not read:
            return b""
        return sock.recv(65536).split(b"\r\n", 1)[0]


def test_the_command_refuses_what_a_web_page_or_a_stranger_sends(server):
    """fault: a foreign web page, a rebinding name, a text/plain POST, no key, against the real command;
    expected: 403, 400, 415, 401."""
    good = {"text": ["green dog"]}
    assert (
        server.post("/translate", json=good, headers={"X-API-Key": KEY, "Origin": "https://evil.example"}).status_code
        == 403
    )
    assert server.get("/info", headers={"X-API-Key": KEY, "Host": "evil.example:5000"}).status_code == 400
    text_plain = {"X-API-Key": KEY, "Content-Type": "text/plain"}
    assert server.post("/translate", content=b'{"text": ["a"]}', headers=text_plain).status_code == 415
    assert server.post("/translate", json=good, headers={"X-API-Key": "not-this-one"}).status_code == 401
    assert server.get("/health", headers={}).status_code == 200  # probes need no key
    answer = server.post("/translate", json=good, headers={"X-API-Key": KEY, "Origin": APP})
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == APP


def test_bodies_past_pythons_limits_are_422_over_real_http(server):
    """fault: a real client sends deep nesting, a 5000-digit number, alpha 1e308;
    expected: 422 JSON each, the server goes on."""
    json_key = {"X-API-Key": KEY, "Content-Type": "application/json"}
    for body in (
        b'{"text": ' + b"[" * 20_000 + b"]" * 20_000 + b"}",
        b'{"text": ["a"], "beam": ' + b"7" * 5000 + b"}",
        b'{"text": ["a"], "alpha": 1e308}',
        b'{"text": ["a"], "max_len_b": 1000000000000000000000000000000}',
    ):
        answer = server.post("/translate", content=body, headers=json_key)
        assert answer.status_code == 422 and "\n" not in answer.text, answer.text
    assert server.post("/translate", json={"text": ["green dog"]}).status_code == 200


def test_a_client_leaving_mid_upload_is_one_quiet_line(server):
    """fault: clients disconnect halfway through their bodies, or send a Content-Length of 5000 digits;
    expected: one log line for the cause, no traceback."""
    head = (
        f"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {KEY}\r\n"
        "Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
    for _ in range(3):
        raw(server, head.replace("{length}", "4000").encode() + b'{"text": ["half', read=False)
    wait_until(lambda: "went away after sending" in server.stderr(), 60, "the disconnects to be logged")
    status = raw(server, head.replace("{length}", "9" * 5000).encode() + b"{}")
    assert status.startswith(b"HTTP/1.1 4"), status  # 413 from mtkit, or uvicorn's own 400 for the header
    assert server.post("/translate", json={"text": ["green dog"]}).status_code == 200
    log = server.stderr()
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log
    assert log.count("went away after sending") == 1, log  # one line per cause, not per event (issue 46 row 2)
