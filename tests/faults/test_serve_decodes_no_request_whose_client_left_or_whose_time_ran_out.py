"""Requests to `mtkit serve` that nobody waits for any more are not decoded.

All 8 abandoned heavy requests were decoded, and a one-word request behind them waited 17-49 s.
Now a request whose client disconnects is taken out of the queue before it is decoded, and past
--request-timeout a queued request is answered 503 (never decoded) and one being decoded 504
(its batch does not wait for it). The gated decoder (tests/support/serve.py) counts batches.
"""

from __future__ import annotations

import json
import threading

import pytest

for _name in ("httpx", "fastapi", "uvicorn"):
    pytest.importorskip(_name)

from tests.support.serve import connect, gated_server, post_head, wait_until  # noqa: E402


def in_background(call) -> tuple[threading.Thread, list]:
    got: list = []
    thread = threading.Thread(target=lambda: got.append(call()), daemon=True)
    thread.start()
    return thread, got


def dropped(server) -> dict:
    return server.get("/health").json()["dropped"]


def test_requests_whose_clients_left_are_never_decoded(cli_model, tmp_path):
    """fault: clients leave before their answer; expected: their requests dropped undecoded, the next answered."""
    server, gate = gated_server(cli_model, tmp_path, "--queue-size", "8")
    try:
        gate.close()
        first, got = in_background(lambda: server.post("/translate", json={"text": ["green dog"]}))
        gate.wait_started(1)  # the decoder is busy with the first request
        leaving = [connect(server) for _ in range(3)]
        for k, sock in enumerate(leaving):
            sock.sendall(post_head("/translate", json.dumps({"text": [f"a heavy request {k}"] * 8}).encode()))
        wait_until(lambda: server.get("/health").json()["queued"] == 3, 60, "three requests queued")
        for sock in leaving:
            sock.close()
        wait_until(lambda: dropped(server)["client_gone"] == 3, 60, "three requests dropped")
        gate.open()
        first.join(60)
        assert got[0].status_code == 200
        assert server.post("/translate", json={"text": ["a dog"]}).status_code == 200
        assert gate.started() == 2  # the first request's batch and the last one's: none of those who left
        assert server.get("/health").json()["decoded"]["requests"] == 2
    finally:
        gate.open()
        assert server.stop() == 0
    assert "Traceback" not in server.stderr()


def test_past_the_request_timeout_a_queued_request_gets_503_and_a_decoding_one_504(cli_model, tmp_path):
    """fault: requests wait past --request-timeout; expected: 503 for one still queued (never decoded), 504 for
    one being decoded, the server goes on."""
    server, gate = gated_server(cli_model, tmp_path, "--queue-size", "8", "--request-timeout", "1")
    try:
        gate.close()
        decoding, got_decoding = in_background(lambda: server.post("/translate", json={"text": ["green dog"]}))
        gate.wait_started(1)
        queued, got_queued = in_background(lambda: server.post("/translate", json={"text": ["a dog"]}))
        decoding.join(60)
        queued.join(60)
        assert got_decoding[0].status_code == 504, got_decoding[0].text
        assert got_queued[0].status_code == 503 and got_queued[0].headers["retry-after"] == "1"
        assert "--request-timeout 1 s" in got_queued[0].json()["error"]
        gate.open()
        assert server.post("/translate", json={"text": ["a dog"]}).status_code == 200
        assert gate.started() == 2  # the queued request was never decoded
        assert dropped(server)["timed_out"] == 2
    finally:
        gate.open()
        assert server.stop() == 0
