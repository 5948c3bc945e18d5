"""/health while batches keep failing, and the bounded drain after SIGTERM, on the app in-process (fake model)."""

from __future__ import annotations

import asyncio
import threading

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from mtkit.config import DecodeConfig  # noqa: E402
from mtkit.serve import service as service_module  # noqa: E402
from mtkit.serve.payload import RequestError  # noqa: E402
from mtkit.serve.service import FAILING_AFTER  # noqa: E402
from tests.support.fake_service import FakeService, client, ready, reverse  # noqa: E402
from tests.support.serve import wait_until  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")


def broken(lines, config):
    raise RuntimeError("the device is gone")


def test_health_says_failing_after_batches_fail_in_a_row(monkeypatch):
    service = FakeService()
    with client(service) as http:
        ready(http)
        service.decode = broken
        for i in range(FAILING_AFTER):
            assert http.get("/health").status_code == 200  # fewer than FAILING_AFTER failures: still ready
            assert http.post("/translate", json={"text": [f"line {i}"]}).status_code == 500
        health = http.get("/health")
        assert health.status_code == 503 and health.json()["status"] == "failing"
        assert health.json()["failed_in_a_row"] == FAILING_AFTER and "the device is gone" in health.json()["last_error"]
        monkeypatch.setattr(service_module, "FAILING_FOR_S", 0.0)  # long after the last failure: ready again
        assert http.get("/health").status_code == 200
        monkeypatch.setattr(service_module, "FAILING_FOR_S", 60.0)
        assert http.get("/health").status_code == 503
        service.decode = reverse
        assert http.post("/translate", json={"text": ["abc"]}).json()["translations"] == ["cba"]
        assert http.get("/health").json() | {"decoded": None} == {
            "status": "ready",
            "model": "fake.pt",
            "queued": 0,
            "decoded": None,
            "failed_in_a_row": 0,
            "dropped": {"client_gone": 0, "timed_out": 0},
        }


def test_the_drain_time_bounds_what_waits_after_sigterm():
    """A batch decoding past the drain time and one queued behind it are both answered 503, at once."""
    service = FakeService(drain_timeout_s=0.3)
    failed = threading.Event()
    service.start_loading(failed.set)
    wait_until(lambda: service.ready, 30, "the fake model to load")
    service.hold.clear()  # decoding never ends by itself

    async def two_requests() -> list[BaseException | object]:
        first = asyncio.ensure_future(service.translate(["held"], DecodeConfig()))
        second = asyncio.ensure_future(service.translate(["queued"], DecodeConfig(beam=2)))
        await asyncio.sleep(0.05)
        service.begin_drain()
        return await asyncio.gather(first, second, return_exceptions=True)

    answers = asyncio.run(two_requests())
    assert all(isinstance(a, RequestError) and a.status == 503 and "drain" in a.message for a in answers), answers
    service.close()  # returns though the decoder is still held
    service.hold.set()
    assert not failed.is_set()


def test_within_the_drain_time_everything_is_answered():
    service = FakeService(drain_timeout_s=30)
    service.start_loading(lambda: None)
    wait_until(lambda: service.ready, 30, "the fake model to load")
    service.hold.clear()

    async def drained() -> list[object]:
        waiting = [asyncio.ensure_future(service.translate([w], DecodeConfig())) for w in ("ab", "cd")]
        await asyncio.sleep(0.05)
        service.begin_drain()
        service.hold.set()
        return await asyncio.gather(*waiting)

    assert [[t.text for t in a] for a in asyncio.run(drained())] == [["ba"], ["dc"]]  # type: ignore[attr-defined]
    service.close()
