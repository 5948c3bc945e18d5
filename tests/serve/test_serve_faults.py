"""`mtkit serve` under overload, decoding errors and SIGTERM, made deterministic by a gated decoder.

The server runs as `python -m tests.support.gated serve ...` (its decoder wrapped by
tests.support.serve:gated, a monkeypatch in that process): a batch that starts decoding waits
for the test to open the gate, so "one request decoding, one queued" is a
state the test can reach and check through /health before it sends the next request.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from typing import Any

import pytest

for _name in ("httpx", "fastapi", "uvicorn"):
    pytest.importorskip(_name)

from tests.support.cli import ROOT, run_cli
from tests.support.serve import gated_server, wait_until


def send(server: Any, lines: list[str], answers: list[Any]) -> threading.Thread:
    """POST /translate in a thread; the response lands in `answers`."""
    thread = threading.Thread(target=lambda: answers.append(server.post("/translate", json={"text": lines})))
    thread.start()
    return thread


def fill(server: Any, gate: Any, answers: list[Any]) -> list[threading.Thread]:
    """One request decoding (held at the gate) and one queued: the queue of size 1 is full."""
    gate.close()
    first = send(server, ["green dog"], answers)
    gate.wait_started(1)
    second = send(server, ["small tree"], answers)
    wait_until(lambda: server.get("/health").json()["queued"] == 1, 60, "the second request to be queued")
    return [first, second]


@pytest.fixture(scope="module")
def gated(cli_model, tmp_path_factory):
    srv, gate = gated_server(cli_model, tmp_path_factory.mktemp("gated"))
    yield srv, gate
    gate.open()
    srv.stop()


def test_full_queue_answers_503_at_once(gated):
    server, gate = gated
    answers: list[Any] = []
    threads = fill(server, gate, answers)
    refused = server.post("/translate", json={"text": ["big house"]})
    assert refused.status_code == 503
    assert refused.headers["Retry-After"] == "1" and "busy" in refused.json()["error"]
    gate.open()
    for t in threads:
        t.join(60)
    assert [a.status_code for a in answers] == [200, 200]  # nothing queued was lost


def test_decoding_error_fails_only_its_batch(gated):
    server, gate = gated
    gate.open()
    failed = server.post("/translate", json={"text": ["FAIL here"]})
    assert failed.status_code == 500
    assert "injected decoding failure" in failed.json()["error"]
    ok = server.post("/translate", json={"text": ["green dog"]})
    assert ok.status_code == 200 and len(ok.json()["translations"]) == 1


def test_sigterm_drains_the_queue_and_exits_0(cli_model, tmp_path):
    server, gate = gated_server(cli_model, tmp_path)
    answers: list[Any] = []
    threads = fill(server, gate, answers)
    server.proc.send_signal(signal.SIGTERM)

    def refused() -> bool:
        import httpx

        try:
            httpx.get(server.url + "/health", timeout=5)
        except httpx.TransportError:
            return True
        return False

    wait_until(refused, 60, "the server to stop accepting connections")
    gate.open()
    for t in threads:
        t.join(60)
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert server.proc.wait(timeout=60) == 0, server.stderr()
    assert "queue drained" in server.stderr()


def test_sigterm_past_the_drain_timeout_answers_503_and_exits_0(cli_model, tmp_path):
    """A decoder that never finishes: after --drain-timeout, both waiting clients get 503 and the server exits."""
    server, gate = gated_server(cli_model, tmp_path, "--drain-timeout", "1")
    answers: list[Any] = []
    threads = fill(server, gate, answers)
    server.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(60)
    assert server.proc.wait(timeout=60) == 0, server.stderr()  # the gate never opened
    assert [a.status_code for a in answers] == [503, 503], [a.text for a in answers]
    assert all("drain" in a.json()["error"] and a.headers["Retry-After"] == "1" for a in answers)
    log = server.stderr()
    assert "drain time (1 s) is up: 2 request(s)" in log and "Traceback" not in log


def test_missing_extra_is_one_sentence(cli_model, tmp_path):
    """With fastapi unimportable (a stand-in package that raises ImportError), serve says what to install."""
    fake = tmp_path / "fastapi"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('No module named fastapi', name='fastapi')\n")
    path = os.pathsep.join([str(tmp_path), str(ROOT)])
    result = run_cli("serve", "-m", cli_model, env={"PYTHONPATH": path}, process=True)  # a fresh import of fastapi
    assert result.returncode == 1
    assert "pip install 'mtkit[serve]'" in result.stderr and "Traceback" not in result.stderr


def test_missing_model_two_models_and_busy_port_are_one_sentence(cli_model, tmp_path):
    result = run_cli("serve", "-m", tmp_path / "none.pt")
    assert result.returncode == 1 and "does not exist" in result.stderr and "Traceback" not in result.stderr
    result = run_cli("serve", "-m", cli_model, "-m", cli_model)
    assert result.returncode == 1 and "one model for now" in result.stderr and "Traceback" not in result.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        # A process: were the port free after all, a server in this one would never return.
        result = run_cli("serve", "-m", cli_model, "--port", str(busy.getsockname()[1]), process=True)
    assert result.returncode == 1 and "cannot listen on 127.0.0.1:" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_serve_runs_on_the_stdlib_event_loop_even_where_uvloop_is_installed(cli_model, monkeypatch):
    """uvloop accepts in C, past ListeningSocket.accept (the connection limit): uvicorn's "auto" would take it."""
    import uvicorn

    seen: list[Any] = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: seen.append(self.config))
    result = run_cli("serve", "-m", cli_model, "--port", "0")
    assert result.returncode == 0, result.stderr
    (config,) = seen
    loop = config.get_loop_factory()()
    try:
        assert config.loop == "asyncio" and type(loop).__module__.startswith("asyncio"), (config.loop, type(loop))
    finally:
        loop.close()
