"""LibreTranslate's contract beyond what Mastodon and libretranslatepy send, checked against LibreTranslate's own source
and tests: its web page's multipart posts, fields in the query string (deep-translator), /frontend/settings, /suggest,
/spec, codes in any case, a detected language the model does not translate from, text with nothing to translate,
429 when busy, and 400 (not 401) for a malformed request."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from mtkit.serve.guard import Access  # noqa: E402
from tests.support.fake_service import EnglishGerman, client, ready  # noqa: E402
from tests.support.serve import wait_until  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
GERMAN = "Ein Mann fährt mit dem Fahrrad die Straße entlang und zwei Hunde spielen im Schnee."
KEY = "k3y-for-tests"


@pytest.fixture
def http():
    with client(EnglishGerman()) as test_client:
        ready(test_client)
        yield test_client


def test_a_multipart_form_as_libretranslates_page_posts_it(http):
    form = {"q": "a dog runs", "source": "en", "target": "de", "format": "text", "api_key": "", "secret": "x"}
    answer = http.post("/translate", files={k: (None, v) for k, v in form.items()})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"translatedText": "snur god a"}


def test_fields_in_the_query_string_of_a_request_without_a_body(http):
    answer = http.post("/translate", params={"q": "a dog", "source": "en", "target": "de"})
    assert answer.status_code == 200 and answer.json() == {"translatedText": "god a"}
    detect = http.post("/detect", params={"q": "a dog runs in the park with a ball"})
    assert detect.status_code == 200 and detect.json()[0]["language"] == "en"


def test_frontend_settings_suggest_and_spec(http):
    settings = http.get("/frontend/settings")
    assert settings.status_code == 200
    assert settings.json()["language"] == {
        "source": {"code": "en", "name": "English"},
        "target": {"code": "de", "name": "German"},
    }
    assert settings.json()["keyRequired"] is False and settings.json()["suggestions"] is False
    suggest = http.post("/suggest", data={"q": "a", "s": "b", "source": "en", "target": "de"})
    assert suggest.status_code == 403 and suggest.json() == {"error": "Suggestions are disabled on this server."}
    spec = http.get("/spec")
    assert spec.status_code == 200 and "/translate" in spec.json()["paths"]
    assert http.post("/spec").status_code == 405


def test_language_codes_in_any_case(http):
    answer = http.post("/translate", json={"q": "a dog", "source": "EN", "target": "De"})
    assert answer.status_code == 200 and answer.json() == {"translatedText": "god a"}


def test_a_detected_language_the_model_does_not_translate_from_is_refused(http):
    """German sent with source auto to an English-German model: LibreTranslate answers 400, never a translation."""
    answer = http.post("/translate", json={"q": GERMAN, "source": "auto", "target": "de"})
    assert answer.status_code == 400
    assert answer.json() == {"error": "de to de is not a direction this server translates."}
    english = http.post("/translate", json={"q": "a dog runs in the park", "source": "auto", "target": "de"})
    assert english.status_code == 200 and english.json()["detectedLanguage"]["language"] == "en"


def test_text_with_nothing_to_translate_comes_back_as_it_is(http):
    answer = http.post("/translate", json={"q": ["🙂👍", "a dog", " !"], "source": "auto", "target": "de"})
    assert answer.status_code == 200
    assert answer.json()["translatedText"] == ["🙂👍", "god a", " !"]
    assert answer.json()["detectedLanguage"][0] == {"confidence": 0.0, "language": "en"}


def test_a_busy_server_answers_429_with_retry_after():
    service = EnglishGerman()
    with client(service) as http, ThreadPoolExecutor(8) as pool:
        ready(http)
        service.hold.clear()  # every batch waits; beams differ, so each request is a batch: one decoding, 4 queued
        held = [pool.submit(http.post, "/translate", json={"text": [f"line {k}"], "beam": k + 1}) for k in range(5)]
        wait_until(lambda: service.batcher is not None and service.batcher.queued == 4, 30, "a full queue")
        answer = http.post("/translate", json={"q": "a dog", "source": "en", "target": "de"})
        native = http.post("/translate", json={"text": ["a dog"]})
        service.hold.set()
        assert answer.status_code == 429 and answer.headers["retry-after"] == "1", answer.text
        assert native.status_code == 503  # mtkit's own API says 503, as before
        assert [f.result().status_code for f in held] == [200] * 5


def test_a_malformed_request_is_400_before_a_missing_key_is_401():
    with client(EnglishGerman(access=Access(api_key=KEY))) as http:
        ready(http)
        bad_json = http.post("/translate", content=b'{"q": ', headers={"Content-Type": "application/json"})
        assert bad_json.status_code == 400, bad_json.text
        no_q = http.post("/translate", files={"source": (None, "en")})
        assert no_q.status_code == 400, no_q.text
        form = {"q": "a dog", "source": "en", "target": "de", "api_key": KEY}
        keyed = http.post("/translate", files={k: (None, v) for k, v in form.items()})
        assert keyed.status_code == 200 and keyed.json() == {"translatedText": "god a"}
        settings = http.get("/frontend/settings")  # what LibreTranslate's page reads before it has a key
        assert settings.status_code == 200 and settings.json()["keyRequired"] is True
        assert http.get("/spec").status_code == 200 and http.get("/info").status_code == 401


def test_a_refused_detection_decodes_nothing():
    service = EnglishGerman()
    decoded = threading.Event()
    with client(service) as http:
        ready(http)
        service.decode = lambda lines, config: decoded.set()  # type: ignore[assignment, return-value]
        http.post("/translate", json={"q": GERMAN, "source": "auto", "target": "de"})
    assert not decoded.is_set()
