"""The app in-process around a fake model: a Service whose "decoder" reverses each line (or raises).

For tests of what the HTTP layer does (Host, Origin, API key, bodies, /health, drain) in a
fraction of a second, without torch or a subprocess; tests/support/serve.py's `Server` is the
real command, for what only a real process shows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from mtkit.config import DecodeConfig
from mtkit.decode.translator import Translation
from mtkit.serve.batcher import Batcher
from mtkit.serve.languages import Directions
from mtkit.serve.payload import Limits
from mtkit.serve.service import ServeSettings, Service
from tests.support.serve import wait_until

BASE_URL = "http://127.0.0.1:5000"  # TestClient's own default, http://testserver, is a Host the server refuses


def reverse(lines: list[str], config: DecodeConfig) -> list[Translation]:
    return [Translation(i + 1, [(line[::-1], -0.5)]) for i, line in enumerate(lines)]


class FakeService(Service):
    """Loaded at once; `decode` (replaceable while serving) gets each batch; `hold` keeps batches waiting."""

    def __init__(self, limits: Limits = Limits(max_lines=8, max_chars=400), **settings: Any) -> None:
        super().__init__(ServeSettings(models=("fake.pt",), limits=limits, **settings))
        self.decode: Callable[[list[str], DecodeConfig], list[Translation]] = reverse
        self.hold = threading.Event()
        self.hold.set()

    def _load(self) -> None:
        def decode(lines: list[str], config: DecodeConfig, *rest: object) -> list[Translation]:
            assert self.hold.wait(30)
            return self.decode(lines, config)

        self.info = {"model": "fake.pt"}
        self.batcher = Batcher(decode, len, max_tokens=100, wait_s=0, queue_size=4)


class EnglishGerman(FakeService):
    """The fake model as an English-German one: its languages known, as `--languages en-de` makes them."""

    def _load(self) -> None:
        self.set_directions(Directions((("en", "de"),)))
        super()._load()


def client(service: Service, base_url: str = BASE_URL, **kwargs: Any) -> Any:
    """A TestClient (use it as a context manager: that runs the lifespan) on a loaded fake model."""
    from fastapi.testclient import TestClient

    from mtkit.serve.app import create_app

    return TestClient(create_app(service), base_url=base_url, raise_server_exceptions=True, **kwargs)


def ready(test_client: Any) -> None:
    wait_until(lambda: test_client.get("/health").status_code == 200, 30, "the fake model to load")
