"""LibreTranslate's /translate with `alternatives` of `Infinity` or `1e400` (JSON reads both as an infinite float)
answered 500 (OverflowError); it is the client's mistake: 400 in one sentence."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from tests.support.fake_service import EnglishGerman, client, ready  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")


@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "1e400", "NaN", '"inf"'])
def test_alternatives_that_are_no_whole_number_get_400(value):
    """fault: {"q": ..., "alternatives": Infinity}; expected: 400 {"error": one sentence}, the server healthy."""
    with client(EnglishGerman()) as http:
        ready(http)
        body = f'{{"q": "a dog", "source": "en", "target": "de", "alternatives": {value}}}'
        answer = http.post("/translate", content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == 400, answer.text
        assert answer.json() == {"error": "alternatives must be a number."}
        assert http.get("/health").status_code == 200
