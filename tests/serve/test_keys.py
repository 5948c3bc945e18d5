"""Keys with limits: a key file the server re-reads, each key's requests a minute and characters a day, 429 with
Retry-After past them, nothing decoded past a limit, and one key at its limit slowing no other."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from mtkit.errors import MtkitError  # noqa: E402
from mtkit.serve import keys as keys_module  # noqa: E402
from mtkit.serve.guard import Access  # noqa: E402
from mtkit.serve.keys import Key, KeyFile, Usage, parse_keys  # noqa: E402
from tests.support.fake_service import EnglishGerman, client, ready  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
ALICE, BOB, CAROL = "alice-k3y", "bob-k3y", "carol-k3y"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "keys"
    path.write_text(
        f"# the keys\n{ALICE} name=alice requests_per_minute=2\n{BOB} name=bob characters_per_day=10\n", "utf-8"
    )
    path.chmod(0o600)
    return path


def test_a_key_past_its_requests_a_minute_gets_429_and_others_go_on(key_file):
    service = EnglishGerman(access=Access(key_file=KeyFile(str(key_file))))
    with client(service) as http:
        ready(http)
        for _ in range(2):
            assert http.post("/translate", json={"text": ["a"]}, headers=bearer(ALICE)).status_code == 200
        refused = http.post("/translate", json={"text": ["a"]}, headers=bearer(ALICE))
        assert refused.status_code == 429 and 1 <= int(refused.headers["retry-after"]) <= 60
        assert "2 requests a minute" in refused.json()["error"]
        assert http.get("/info", headers=bearer(ALICE)).status_code == 429  # every endpoint counts
        assert http.post("/translate", json={"text": ["a"]}, headers=bearer(BOB)).status_code == 200
        lt = http.post("/translate", data={"q": "a", "source": "en", "target": "de", "api_key": ALICE})
        assert lt.status_code == 429 and "retry-after" in lt.headers
    assert service.batcher is not None and service.batcher.done["requests"] == 3  # nothing past a limit decoded


def test_a_key_past_its_characters_a_day_gets_429_until_midnight(key_file):
    service = EnglishGerman(access=Access(key_file=KeyFile(str(key_file))))
    with client(service) as http:
        ready(http)
        assert http.post("/translate", json={"text": ["abcdefgh"]}, headers=bearer(BOB)).status_code == 200
        refused = http.post("/translate", json={"text": ["abc"]}, headers=bearer(BOB))
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) <= 86400
        assert "10 characters a day" in refused.json()["error"]
        assert http.post("/translate", json={"text": ["ab"]}, headers=bearer(BOB)).status_code == 200  # 10 in all
    assert service.batcher is not None and service.batcher.done["requests"] == 2


def test_the_key_file_is_reread_when_it_changes(key_file, monkeypatch):
    monkeypatch.setattr(keys_module, "RELOAD_EVERY_S", 0.0)
    service = EnglishGerman(access=Access(key_file=KeyFile(str(key_file))))
    with client(service) as http:
        ready(http)
        assert http.post("/translate", json={"text": ["a"]}, headers=bearer(CAROL)).status_code == 401
        key_file.write_text(f"{CAROL} name=carol\n{BOB}\n", "utf-8")
        assert http.post("/translate", json={"text": ["a"]}, headers=bearer(CAROL)).status_code == 200
        assert http.post("/translate", json={"text": ["a"]}, headers=bearer(ALICE)).status_code == 401  # revoked
        key_file.write_text("not-a-key requests_per_minute=many\n", "utf-8")  # a mistake: the keys before stay
        assert http.post("/translate", json={"text": ["a"]}, headers=bearer(CAROL)).status_code == 200


def test_key_file_mistakes_are_one_sentence_naming_the_line(tmp_path):
    for text, needle in [
        ("k1 rpm=3\n", "line 1: 'rpm=3' is not name=NAME"),
        ("k1\nk2 characters_per_day=-1\n", "line 2: characters_per_day must be a whole number"),
        ("k1\nk1\n", "a key is listed twice"),
    ]:
        with pytest.raises(MtkitError, match=needle):
            parse_keys(text, "the API keys file keys")
    assert parse_keys("# none\n\n", "f") == ()
    with pytest.raises(MtkitError, match="cannot read the API keys file"):
        KeyFile(str(tmp_path / "missing"))


def test_usage_windows():
    usage, key = Usage(), Key("k", "s", requests_per_minute=1, characters_per_day=5)
    usage.admit(key, now=100.0)
    with pytest.raises(keys_module.OverLimit) as refused:
        usage.admit(key, now=130.0)
    assert refused.value.retry_after == 30 and not refused.value.quota
    with pytest.raises(keys_module.OverLimit):
        usage.check(key, now=150.0)
    usage.check(key, now=160.0)  # the first left the minute's window; asked, not counted:
    usage.admit(key, now=160.0)
    usage.charge(key, 5, now=86400 * 3 + 10)
    with pytest.raises(keys_module.OverLimit) as quota:
        usage.charge(key, 1, now=86400 * 3 + 20)
    assert quota.value.quota and quota.value.retry_after == 86400 - 20
    usage.charge(key, 5, now=86400 * 4 + 1)  # a new UTC day


def refused_from_the_header(app, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict, dict]:
    """One request through the ASGI app whose body may not be read: its receive fails the test if called."""
    answer: dict = {}

    async def receive() -> dict:
        raise AssertionError(f"{path}: the body of a request past its key's limit was read")

    async def send(message: dict) -> None:
        answer.setdefault(message["type"], message)

    raw = [(b"host", b"127.0.0.1:5000"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": raw,
             "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 5000)}  # fmt: skip
    asyncio.run(app(scope, receive, send))
    start = answer["http.response.start"]
    return start["status"], dict(start["headers"]), json.loads(answer["http.response.body"]["body"])


def test_a_key_past_its_requests_a_minute_is_refused_before_its_body_is_read(key_file):
    """The cheapest refusal: from the header alone, in each API's shape, the body never read (nor parsed), so a
    client flooding past its limit costs the server as little as a request can; it counts toward nothing."""
    from mtkit.serve.app import create_app

    access = Access(key_file=KeyFile(str(key_file)))
    alice = access.keys.find(ALICE)
    access.keys.usage.admit(alice)
    access.keys.usage.admit(alice)  # her 2 requests this minute
    app = create_app(EnglishGerman(access=access))
    malformed = b'{"q": '  # a body would be 400 if it were read
    json_type = {"Content-Type": "application/json"}
    for path, headers, shape in [
        ("/translate", bearer(ALICE), lambda body: body["error"]),  # mtkit's and LibreTranslate's
        ("/translate", {"X-API-Key": ALICE, "Content-Type": "application/x-www-form-urlencoded"}, lambda b: b["error"]),
        ("/detect", bearer(ALICE), lambda body: body["error"]),
        ("/v2/translate", {"Authorization": f"DeepL-Auth-Key {ALICE}"}, lambda body: body["message"]),
        ("/v1/chat/completions", bearer(ALICE), lambda body: body["error"]["message"]),
        ("/translator/translate", bearer(ALICE), lambda body: body["error"]),
    ]:
        status, answer_headers, body = refused_from_the_header(app, path, {**json_type, **headers}, malformed)
        assert status == 429 and 1 <= int(answer_headers[b"retry-after"]) <= 60, (path, body)
        assert "2 requests a minute" in shape(body), (path, body)
    openai = refused_from_the_header(app, "/v1/chat/completions", bearer(ALICE), malformed)[2]
    assert openai["error"]["code"] == "rate_limit_exceeded" and openai["error"]["type"] == "rate_limit_error"
    assert len(access.keys.usage._requests["alice"]) == 2  # the refusals counted nothing
