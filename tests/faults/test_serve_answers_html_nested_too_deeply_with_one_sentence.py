"""`format: html` with tags nested thousands deep answered 500 (a RecursionError in the markup's parser); the server
answers one sentence (400) or the translation, never a 500, and stays healthy."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from mtkit.serve.payload import Limits  # noqa: E402
from tests.support.fake_service import EnglishGerman, client, ready  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")


@pytest.mark.parametrize("depth", [2_000, 10_000])
def test_deeply_nested_tags_are_a_400_or_translated_never_a_500(depth):
    """fault: {"q": "<b>" * DEPTH + "x" + "</b>" * DEPTH, "format": "html"}; expected: 400 with one sentence (or 200
    with the tags kept), /health 200 after."""
    html = "<b>" * depth + "a dog" + "</b>" * depth
    with client(EnglishGerman(limits=Limits(max_chars=100_000))) as http:
        ready(http)
        answer = http.post("/translate", json={"q": html, "source": "en", "target": "de", "format": "html"})
        assert answer.status_code in (200, 400), answer.text
        if answer.status_code == 400:
            (message,) = answer.json().values()
            assert "deep" in message and message.endswith(".") and "\n" not in message
        else:
            assert answer.json()["translatedText"].count("<b>") == depth
        assert http.get("/health").status_code == 200
