"""Row 1 of issue 37: a web page the user visits cannot make the browser use `mtkit serve` on 127.0.0.1.

A page could POST jobs (a form or a text/plain fetch needs no CORS preflight) and a
DNS-rebinding page could read /info and translations. Now: a foreign Origin gets 403, a Host
that is not this server's name 400, a body that is not application/json 415; requests with
no Origin (curl, scripts) and pages allowed with --allow-origin (with CORS) go through.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from mtkit.serve.guard import Access  # noqa: E402
from tests.support.fake_service import FakeService, client, ready  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
APP = "https://app.example.org"
GOOD = {"text": ["abc"]}


def one_sentence(answer, status: int) -> str:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/json" and "\n" not in answer.text
    error = answer.json()["error"]
    assert error.endswith(".")
    return error


def test_a_foreign_web_page_cannot_post_or_read():
    """fault: a web page the user visits POSTs a job or reads /info; expected: 403, nothing decoded."""
    service = FakeService()
    with client(service) as http:
        ready(http)
        evil = {"Origin": "https://evil.example.com"}
        assert "not allowed" in one_sentence(http.post("/translate", json=GOOD, headers=evil), 403)
        one_sentence(http.get("/info", headers=evil), 403)
        one_sentence(http.post("/translate", json=GOOD, headers={"Origin": "null"}), 403)  # sandboxed frame
        preflight = {**evil, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
        one_sentence(http.options("/translate", headers=preflight), 403)
        assert http.post("/translate", json=GOOD).status_code == 200  # no Origin: curl, scripts
    assert service.batcher is not None and service.batcher.done["requests"] == 1


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None]
)
def test_a_body_that_is_not_json_is_refused_before_it_is_read(content_type):
    """fault: a cross-site form or text/plain POST (no preflight) carries a JSON job; expected: 415."""
    service = FakeService()
    with client(service) as http:
        ready(http)
        headers = {"Content-Type": content_type} if content_type else {}
        answer = http.post("/translate", content=json.dumps(GOOD).encode(), headers=headers)
        if content_type and content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            # LibreTranslate's forms (libretranslatepy's, its web page's): read as fields, never as a JSON job
            assert answer.status_code == 400 and list(answer.json()) == ["error"], answer.text
        else:
            assert "application/json" in one_sentence(answer, 415)
        one_sentence(http.post("/translator/translate", content=b'[{"src": "a"}]', headers=headers), 415)
        ok = http.post(
            "/translate", content=json.dumps(GOOD), headers={"Content-Type": "application/json; charset=UTF-8"}
        )
        assert ok.status_code == 200
    assert service.batcher is not None and service.batcher.done["requests"] == 1


@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:5000", "localhost.evil.example.com:5000"])
def test_a_dns_rebinding_page_gets_400(host):
    """fault: DNS rebinding (a page's own name pointed at 127.0.0.1) reads /info or translations; expected: 400."""
    with client(FakeService()) as http:
        ready(http)
        for answer in (
            http.get("/info", headers={"Host": host}),
            http.post("/translate", json=GOOD, headers={"Host": host}),
        ):
            assert "does not answer to the Host" in one_sentence(answer, 400)
        for name in ("localhost:5000", "127.0.0.1:5000", "[::1]:5000"):
            assert http.post("/translate", json=GOOD, headers={"Host": name}).status_code == 200


def test_allowed_hosts_and_origins_get_cors():
    """fault: a page the operator allowed (--allow-origin) behind a named host (--allow-host);
    expected: 200 with CORS headers."""
    service = FakeService(access=Access(bind="0.0.0.0", hosts=("mt.example.org",), origins=(APP,)))
    with client(service, base_url="http://mt.example.org") as http:
        ready(http)
        preflight = http.options(
            "/translate",
            headers={
                "Origin": APP,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type",
            },
        )
        assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == APP
        assert "POST" in preflight.headers["access-control-allow-methods"]
        answer = http.post("/translate", json=GOOD, headers={"Origin": APP})
        assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == APP
        assert answer.json()["translations"] == ["cba"]
        assert http.get("/info", headers={"Host": "192.0.2.7:5000"}).status_code == 200  # bound to 0.0.0.0
        one_sentence(http.get("/info", headers={"Host": "other.example.org"}), 400)
        one_sentence(http.post("/translate", json=GOOD, headers={"Origin": "https://evil.example.com"}), 403)
