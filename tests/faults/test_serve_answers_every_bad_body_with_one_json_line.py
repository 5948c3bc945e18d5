"""Row 3 of issue 37: no request body, however built, gives a 500 or a traceback in the server's log.

Before: nesting past the recursion limit or an integer of over 4,300 digits gave a text/plain
500 and a traceback; so did a client leaving mid-upload; alpha = 1e308 or max_len_b = 10**30 a
500 "Overflow". Now each is 422 (or 400) with one JSON line, and anything unforeseen is one
JSON line to the client and one log line, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from mtkit.serve.app import create_app  # noqa: E402
from mtkit.serve.payload import Limits  # noqa: E402
from tests.support.fake_service import FakeService, client, ready  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
JSON = {"Content-Type": "application/json"}

BODIES = [
    ("nested past the recursion limit", b'{"text": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", 422, "too deeply"),
    ("an integer of 5000 digits", b'{"text": ["a"], "beam": ' + b"9" * 5000 + b"}", 422, "4300 digits"),
    ("alpha 1e308", b'{"text": ["a"], "alpha": 1e308}', 422, "alpha must be at most"),
    ("alpha Infinity", b'{"text": ["a"], "alpha": Infinity}', 422, "alpha must be at most"),
    ("alpha NaN", b'{"text": ["a"], "alpha": NaN}', 422, "alpha must be at most"),
    ("max_len_a 1e300", b'{"text": ["a"], "max_len_a": 1e300}', 422, "max_len_a must be at most"),
    ("max_len_b 10**30", b'{"text": ["a"], "max_len_b": 1000000000000000000000000000000}', 422, "max_len_b must be"),
    ("max_len_b -1", b'{"text": ["a"], "max_len_b": -1}', 422, "max_len_b must be an integer >= 0"),
    ("nbest 10**30", b'{"text": ["a"], "nbest": 1000000000000000000000000000000}', 422, "nbest must be at most"),
    ("a nested option", b'{"text": ["a"], "alpha": ' + b"[" * 900 + b"]" * 900 + b"}", 422, "alpha must be of type"),
    ("a 200 kB field name", b'{"text": ["a"], "' + b"x" * 200_000 + b'": 1}', 413, "the limit"),
    ("a 10 kB field name", b'{"text": ["a"], "' + b"x" * 10_000 + b'": 1}', 422, "unknown field(s) xxx"),
]


@pytest.mark.parametrize("body,status,says", [b[1:] for b in BODIES], ids=[b[0] for b in BODIES])
def test_a_bad_body_is_one_json_line_and_no_traceback(caplog, body, status, says):
    """fault: a body nested too deep, with a 5000-digit number, or decoding options past every bound;
    expected: 422 (413 past the size cap), one JSON line, no traceback."""
    with client(FakeService(limits=Limits())) as http, caplog.at_level(logging.INFO, logger="mtkit"):
        ready(http)
        answer = http.post("/translate", content=body, headers=JSON)
        assert answer.status_code == status, answer.text
        assert answer.headers["content-type"] == "application/json" and "\n" not in answer.text
        assert says in answer.json()["error"] and len(answer.text) < 400  # the body is not echoed back
        assert http.post("/translate", json={"text": ["abc"]}).status_code == 200
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def test_the_servers_own_settings_stay_allowed():
    """fault: the operator starts the server with max_len_b above the bound a request may ask for; expected: 200."""
    from mtkit.config import DecodeConfig

    with client(FakeService(decode=DecodeConfig(max_len_b=2000))) as http:
        ready(http)
        assert http.post("/translate", json={"text": ["a"], "max_len_b": 2000}).status_code == 200
        assert http.post("/translate", json={"text": ["a"], "max_len_b": 2001}).status_code == 422


def test_an_unforeseen_error_is_one_json_line_and_one_log_line(caplog):
    """fault: an error nobody foresaw inside an endpoint;
    expected: 500 with one JSON line, one log line, no traceback."""
    service = FakeService()
    with client(service) as http, caplog.at_level(logging.INFO, logger="mtkit"):
        ready(http)

        def broken(*args, **kwargs):
            raise KeyError("something nobody foresaw")

        service.translate = broken  # type: ignore[method-assign]
        answer = http.post("/translate", json={"text": ["abc"]})
        assert answer.status_code == 500 and "\n" not in answer.text
        assert answer.json()["error"] == "the server failed on this request (KeyError); it is logged."
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "KeyError" in errors[0].getMessage() and "\n" not in errors[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info]


def test_a_client_that_leaves_mid_upload_leaves_one_quiet_line(caplog):
    """fault: a client disconnects halfway through sending its body;
    expected: one log line, no traceback, the server goes on."""
    service = FakeService()
    app = create_app(service)
    sent: list[dict] = []

    async def go() -> None:
        messages = iter(
            [{"type": "http.request", "body": b'{"text": ["half a ', "more_body": True}, {"type": "http.disconnect"}]
        )

        async def receive() -> dict:
            return next(messages)

        async def send(message: dict) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/translate",
            "raw_path": b"/translate",
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"127.0.0.1:5000"),
                (b"content-type", b"application/json"),
                (b"content-length", b"400"),
            ],
            "client": ("127.0.0.1", 40000),
            "server": ("127.0.0.1", 5000),
            "state": {},
        }
        await app(scope, receive, send)

    with caplog.at_level(logging.INFO, logger="mtkit"):
        asyncio.run(go())  # raised ClientDisconnect through the server before
    assert sent[0]["status"] == 400  # sent into a closed connection: nobody reads it, nothing breaks
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    said = [r.getMessage() for r in caplog.records if "went away" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]
    assert json.loads(sent[1]["body"])["error"].endswith(".")
