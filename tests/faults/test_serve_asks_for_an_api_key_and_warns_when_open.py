"""Row 2 of issue 37: `mtkit serve` can require an API key, and says so when it listens to the network without one.

The key comes from --api-key-file or $MTKIT_SERVE_API_KEY (never the command line, which `ps`
shows to everyone), is compared in constant time, and is needed on every path but /health,
which probes call and which says only ready / loading / failing.
"""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from mtkit.serve import server  # noqa: E402
from mtkit.serve.guard import API_KEY_ENV, Access  # noqa: E402
from mtkit.serve.service import ServeSettings  # noqa: E402
from tests.support.cli import run_cli  # noqa: E402
from tests.support.fake_service import FakeService, client, ready  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
KEY = "k3y-0f-the-server"
GOOD = {"text": ["abc"]}


def test_without_the_key_nothing_but_health_answers():
    """fault: a client without the API key posts a job or reads /info; expected: 401 JSON, nothing decoded."""
    service = FakeService(access=Access(api_key=KEY, origins=("https://app.example.org",)))
    with client(service) as http:
        ready(http)  # /health needs no key
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-API-Key": KEY[:-1]}, {"Authorization": KEY}):
            for answer in (http.post("/translate", json=GOOD, headers=headers), http.get("/info", headers=headers)):
                assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer"
                assert "API key" in answer.json()["error"] and "\n" not in answer.text
        seen = http.post("/translate", json=GOOD, headers={"Origin": "https://app.example.org"})
        assert seen.status_code == 401 and seen.headers["access-control-allow-origin"] == "https://app.example.org"
        assert service.batcher is not None and service.batcher.done["requests"] == 0
        assert http.post("/translate", json=GOOD, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        assert http.post("/translate", json=GOOD, headers={"X-API-Key": KEY}).status_code == 200
        assert http.get("/info", headers={"X-API-Key": KEY}).status_code == 200
    assert service.batcher.done["requests"] == 2


def listening(caplog, monkeypatch, host: str, key: str | None) -> list[str]:
    """What `serve` logs when it starts on `host` (uvicorn's run stubbed out: it returns at once)."""
    monkeypatch.setattr("uvicorn.Server.run", lambda self, sockets=None: None)
    with caplog.at_level(logging.INFO, logger="mtkit.serve"):
        server.serve(ServeSettings(models=("fake.pt",), access=Access(bind=host, api_key=key)), host, 0)
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_listening_on_the_network_without_a_key_is_said_once(caplog, monkeypatch):
    """fault: --host 0.0.0.0 with no API key opens a CPU-heavy endpoint to the network; expected: one warning line."""
    (warning,) = listening(caplog, monkeypatch, "0.0.0.0", None)
    assert "no API key" in warning and "--api-key-file" in warning and "\n" not in warning
    caplog.clear()
    assert listening(caplog, monkeypatch, "0.0.0.0", KEY) == []
    assert listening(caplog, monkeypatch, "127.0.0.1", None) == []


def test_a_bad_key_file_is_one_sentence(cli_model, tmp_path, monkeypatch):
    """fault: --api-key-file missing or empty; expected: one sentence, exit 1, the server not started."""
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    result = run_cli("serve", "-m", cli_model, "--api-key-file", tmp_path / "none")
    assert result.returncode == 1 and "cannot read the API key file" in result.stderr
    (tmp_path / "empty").write_text("\n")
    result = run_cli("serve", "-m", cli_model, "--api-key-file", tmp_path / "empty")
    assert result.returncode == 1 and "is empty" in result.stderr and "Traceback" not in result.stderr
    result = run_cli("serve", "-m", cli_model, "--allow-origin", "app.example.org")
    assert result.returncode == 1 and "is not an origin" in result.stderr and "Traceback" not in result.stderr
