"""A 16 kB `format: html` request of inline tags spent 0.5-1.1 s parsing in the server's event loop, and /health (and
every other request) waited for it. Markup is parsed and rendered in a worker thread: here a parse held until the
test lets it go must not hold /health."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from mtkit.decode import markup as decode_markup  # noqa: E402
from mtkit.serve import markup  # noqa: E402
from tests.support.fake_service import EnglishGerman, client, ready  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
HELD_S = 30  # the longest a parse is held: the test fails (slowly) rather than hangs


def test_health_is_answered_while_markup_is_being_parsed(monkeypatch):
    """fault: a `format: html` request whose parsing takes long; expected: /health answered meanwhile."""
    parsing, release = threading.Event(), threading.Event()

    class SlowMarkup(decode_markup.Markup):
        def __init__(self, fragments: Iterable[str]) -> None:
            parsing.set()
            release.wait(HELD_S)
            super().__init__(fragments)

    monkeypatch.setattr(markup, "Markup", SlowMarkup)
    with client(EnglishGerman()) as http, ThreadPoolExecutor(2) as pool:
        ready(http)
        body = {"q": "<p>a <b>dog</b> runs</p>", "source": "en", "target": "de", "format": "html"}
        translated = pool.submit(http.post, "/translate", json=body)
        assert parsing.wait(HELD_S)
        health = pool.submit(http.get, "/health")
        try:
            assert health.result(timeout=HELD_S / 2).status_code == 200  # answered while the parse is held
            assert not release.is_set() and not translated.done()
        finally:
            release.set()
        answer = translated.result(timeout=HELD_S)
        assert answer.status_code == 200 and "<b>" in answer.json()["translatedText"]
