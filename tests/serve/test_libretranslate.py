"""LibreTranslate's API on a real `mtkit serve`: the real Python client, Mastodon's request shapes, keys, errors."""

from __future__ import annotations

import json
import urllib.error

import pytest

for _name in ("httpx", "fastapi", "uvicorn", "libretranslatepy"):
    pytest.importorskip(_name)

from libretranslatepy import LibreTranslateAPI

from tests.support.corpora import synthetic_pairs
from tests.support.serve import Server

LINES = synthetic_pairs(20, seed=11)[0][:4]
KEY = "k3y-for-tests"


@pytest.fixture(scope="module")
def keyed(cli_model, tmp_path_factory):
    """A server with an API key (in a 0600 file) and the pair named on the command line."""
    tmp = tmp_path_factory.mktemp("keyed")
    key_file = tmp / "key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    srv = Server(cli_model, tmp, "--api-key-file", str(key_file), "--languages", "en-de", "--batch-wait-ms", "5")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def open_server(cli_model, tmp_path_factory):
    srv = Server(cli_model, tmp_path_factory.mktemp("open"), "--languages", "en-de", "--max-lines", "4")
    yield srv
    srv.stop()


def native(server: Server, lines: list[str], headers: dict[str, str] | None = None) -> list[str]:
    answer = server.post("/translate", json={"text": lines}, headers=headers or {})
    assert answer.status_code == 200, answer.text
    return answer.json()["translations"]


def test_the_python_client_translates_lists_languages_and_detects(open_server):
    client = LibreTranslateAPI(open_server.url)
    assert client.languages() == [
        {"code": "en", "name": "English", "targets": ["de"]},
        {"code": "de", "name": "German", "targets": []},
    ]
    assert client.translate(LINES[0], "en", "de") == native(open_server, [LINES[0]])[0]
    assert client.detect(LINES[1]) == [{"confidence": 100.0, "language": "en"}]


def test_the_python_client_with_a_key_and_without(keyed):
    headers = {"Authorization": f"Bearer {KEY}"}
    assert (
        LibreTranslateAPI(keyed.url, api_key=KEY).translate(LINES[1], "en", "de")
        == native(keyed, [LINES[1]], headers)[0]
    )
    with pytest.raises(urllib.error.HTTPError) as missing:
        LibreTranslateAPI(keyed.url).translate(LINES[1], "en", "de")
    assert missing.value.code == 400 and "API key" in json.loads(missing.value.read())["error"]
    with pytest.raises(urllib.error.HTTPError) as wrong:
        LibreTranslateAPI(keyed.url, api_key="nope").translate(LINES[1], "en", "de")
    assert wrong.value.code == 403 and json.loads(wrong.value.read()) == {"error": "the API key is not valid."}
    # /languages is open, as LibreTranslate's is; mtkit's own API still wants the key in a header
    assert LibreTranslateAPI(keyed.url).languages()[0]["code"] == "en"
    assert keyed.post("/translate", json={"text": [LINES[0]]}).status_code == 401
    assert keyed.post("/detect", data={"q": "x"}).status_code == 400


def test_mastodon_request_shapes_replayed(keyed):
    """What Mastodon's TranslationService::LibreTranslate sends: JSON, q a list of HTML posts, source auto or the
    post's language, format html, api_key (null when none is set); GET /languages with a JSON content type."""
    listed = keyed.get("/languages", headers={"Content-Type": "application/json"})
    assert listed.status_code == 200
    assert {lang["code"]: lang["targets"] for lang in listed.json()} == {"en": ["de"], "de": []}
    posts = [f"<p>{LINES[0]} <a href=\"https://example.org/x?a=1&amp;b=2\">{LINES[1]}</a></p>", f"<p>{LINES[2]}</p>"]
    body = {"q": posts, "source": "auto", "target": "de", "format": "html", "api_key": KEY}
    answer = keyed.post("/translate", content=json.dumps(body), headers={"Content-Type": "application/json"})
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert [d["language"] for d in data["detectedLanguage"]] == ["en", "en"]  # among en and de, as LibreTranslate
    first, second = data["translatedText"]
    assert first.startswith("<p>") and first.endswith("</p>") and first.count('<a href="https://example.org/x') == 1
    assert second.startswith("<p>") and second.endswith("</p>")
    assert keyed.post("/translate", json={**body, "api_key": None}).status_code == 400  # no key: LibreTranslate's 400
    assert keyed.post("/translate", json={**body, "api_key": "x"}).status_code == 403  # Mastodon: QuotaExceeded


def test_text_format_matches_the_native_api_and_alternatives_are_the_nbest(open_server):
    answer = open_server.post("/translate", json={"q": LINES[:2], "source": "en", "target": "de"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"translatedText": native(open_server, LINES[:2])}
    alt = open_server.post("/translate", json={"q": LINES[0], "source": "en", "target": "de", "alternatives": 2})
    assert alt.status_code == 200, alt.text
    nbest = open_server.post("/translate", json={"text": [LINES[0]], "nbest": 3, "beam": 4}).json()["nbest"][0]
    assert alt.json()["alternatives"] == [h["text"] for h in nbest[1:]]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"source": "en", "target": "de"}, "no q parameter"),
        ({"q": "x", "source": "en"}, "no target parameter"),
        ({"q": "x", "source": "en", "target": "fr"}, "fr is not supported as a target"),
        ({"q": "x", "source": "cs", "target": "de"}, "cs is not supported as a source"),
        ({"q": "x", "source": "en", "target": "de", "format": "pdf"}, "pdf format is not supported"),
        ({"q": "x", "source": "en", "target": "de", "alternatives": "many"}, "alternatives must be a number"),
        ({"q": ["x"] * 5, "source": "en", "target": "de"}, "the limit is 4"),  # mtkit's 413, LibreTranslate's 400
        ({"q": [1], "source": "en", "target": "de"}, "q must be a list of strings"),
    ],
)
def test_errors_are_libretranslates_400_with_one_sentence(open_server, body, needle):
    answer = open_server.post("/translate", json=body)
    assert answer.status_code == 400, answer.text
    assert list(answer.json()) == ["error"] and needle in answer.json()["error"]


def test_a_form_post_is_read_and_a_foreign_origin_still_refused(open_server):
    form = {"q": LINES[0], "source": "en", "target": "de"}
    answer = open_server.post("/translate", data=form)
    assert answer.status_code == 200 and answer.json()["translatedText"] == native(open_server, [LINES[0]])[0]
    refused = open_server.post("/translate", data=form, headers={"Origin": "https://evil.example"})
    assert refused.status_code == 403
    assert open_server.post("/translate", content=b"q=x", headers={"Content-Type": "text/plain"}).status_code == 415


def test_a_model_without_a_recorded_pair_says_so(cli_model, tmp_path):
    srv = Server(cli_model, tmp_path)
    try:
        assert srv.get("/languages").json() == []
        answer = srv.post("/translate", json={"q": "x", "source": "en", "target": "de"})
        assert answer.status_code == 400 and "--languages en-de" in answer.json()["error"]
    finally:
        srv.stop()
