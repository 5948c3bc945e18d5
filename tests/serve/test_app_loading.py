"""The app in-process (no model, no subprocess): /health and requests while the model is still loading."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from mtkit.config import DecodeConfig  # noqa: E402
from mtkit.decode.translator import Translation  # noqa: E402
from mtkit.serve.app import create_app  # noqa: E402
from mtkit.serve.batcher import Batcher  # noqa: E402
from mtkit.serve.service import ServeSettings, Service  # noqa: E402
from tests.support.fake_service import BASE_URL  # noqa: E402
from tests.support.serve import wait_until  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")


class SlowLoading(Service):
    """Loading waits for `loaded`; the 'model' then reverses each line."""

    def __init__(self) -> None:
        super().__init__(ServeSettings(models=("fake.pt",)))
        self.loaded = threading.Event()

    def _load(self) -> None:
        assert self.loaded.wait(30)

        def decode(lines: list[str], config: DecodeConfig, *rest: object) -> list[Translation]:
            return [Translation(i + 1, [(line[::-1], -0.5)]) for i, line in enumerate(lines)]

        self.info = {"model": "fake.pt"}
        self.batcher = Batcher(decode, len, max_tokens=100, wait_s=0, queue_size=4)


def test_not_ready_until_the_model_is_loaded():
    from fastapi.testclient import TestClient

    service = SlowLoading()
    with TestClient(create_app(service), base_url=BASE_URL) as client:
        health = client.get("/health")
        assert health.status_code == 503 and health.json()["status"] == "loading"
        early = client.post("/translate", json={"text": ["abc"]})
        assert early.status_code == 503 and early.headers["Retry-After"] == "1"
        assert client.get("/info").status_code == 503
        service.loaded.set()
        wait_until(lambda: client.get("/health").status_code == 200, 30, "the model to load")
        assert client.get("/health").json()["status"] == "ready"
        answer = client.post("/translate", json={"text": ["abc", "de"]}).json()
        assert answer == {"translations": ["cba", "ed"], "scores": [-0.5, -0.5], "model": "fake.pt"}
    assert service.batcher is not None and service.batcher.done["requests"] == 1
