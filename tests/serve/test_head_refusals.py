"""A key past its requests a minute, refused from the request's head by the server's connections (before h11 and the
app), with the app's own answer, the connection kept; a head h11 might read otherwise goes to the app as before."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

import httpx  # noqa: E402
import uvicorn  # noqa: E402
from uvicorn.server import ServerState  # noqa: E402

from mtkit.serve import keys as keys_module  # noqa: E402
from mtkit.serve.app import create_app, head_refusal  # noqa: E402
from mtkit.serve.connections import ConnectionLimits, protocol_class  # noqa: E402
from mtkit.serve.guard import Access  # noqa: E402
from mtkit.serve.heads import read_head  # noqa: E402
from mtkit.serve.keys import KeyFile  # noqa: E402
from tests.support.fake_service import EnglishGerman  # noqa: E402
from tests.support.serve import connect, keyed_server, post_head  # noqa: E402

LIMITED, FREE = "limited-k3y", "free-k3y"
BODY = b'{"text": ["A dog runs."]}'


def request(path: str = "/translate", key: str = LIMITED, body: bytes = BODY, **headers: str) -> bytes:
    return post_head(path, body, {"Authorization": f"Bearer {key}", **headers})


@pytest.fixture
def access(tmp_path, monkeypatch):
    """A limited key that has used its one request this minute, at a clock that stands still (Retry-After is the
    same in every answer), and a free key."""
    monkeypatch.setattr(keys_module.time, "monotonic", lambda: 1000.0)
    path = tmp_path / "keys"
    path.write_text(f"{LIMITED} name=limited requests_per_minute=1\n{FREE} name=free\n", "utf-8")
    path.chmod(0o600)
    access = Access(key_file=KeyFile(str(path)))
    access.keys.usage.admit(access.keys.find(LIMITED))
    return access


class Transport(asyncio.Transport):
    """What the protocol writes, kept; nothing sent anywhere."""

    def __init__(self) -> None:
        super().__init__()
        self.written, self.closed = bytearray(), False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return {"sockname": ("127.0.0.1", 5000), "peername": ("127.0.0.1", 40000)}.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        pass


def recording_app(seen: list[str]):
    """An ASGI app that says which paths reached it, answering each 200 `ok`."""

    async def app(scope, receive, send):
        seen.append(scope["path"])
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    return app


def feed(app, access: Access | None, *chunks: bytes, protocol_cls=None) -> bytes:
    """Every chunk through one connection of the server's protocol (screening with `access`'s keys when given, or
    `protocol_cls`), the app's tasks run between chunks; what the server wrote."""

    async def run() -> bytes:
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off")
        state = ServerState()
        state.default_headers = [(b"server", b"uvicorn")]
        screen = head_refusal(access) if access is not None else None
        cls = protocol_cls or protocol_class(ConnectionLimits(), screen)
        protocol = cls(config, state, {}, _loop=asyncio.get_running_loop())
        transport = Transport()
        protocol.connection_made(transport)
        for chunk in chunks:
            protocol.data_received(chunk)
            for _ in range(20):
                await asyncio.sleep(0)
        protocol.connection_lost(None)
        return bytes(transport.written)

    return asyncio.run(run())


def statuses(written: bytes) -> list[int]:
    return [int(code) for code in re.findall(rb"HTTP/1\.1 (\d{3}) ", written)]


def test_a_request_past_its_limit_is_answered_from_its_head_and_the_connection_goes_on(access):
    seen: list[str] = []
    written = feed(recording_app(seen), access, request("/v2/translate") + request("/next", key=FREE))
    assert statuses(written) == [429, 200] and seen == ["/next"]  # the refused request never reached the app
    head, _, rest = written.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 429 Too Many Requests\r\nserver: uvicorn\r\nretry-after: 60\r\n")
    assert json.loads(rest[: rest.index(b"HTTP/1.1")]) == {
        "message": "this key's limit of 1 requests a minute is reached; retry in 60 s."
    }  # DeepL's shape on DeepL's path


def test_requests_sent_together_are_each_answered_in_turn(access):
    seen: list[str] = []
    written = feed(recording_app(seen), access, request() * 50 + request("/free", key=FREE))
    assert statuses(written) == [429] * 50 + [200] and seen == ["/free"]


def test_a_refused_body_that_arrives_in_pieces_is_dropped_and_the_next_request_read(access):
    """The body's rest is dropped as it comes. A head that is not whole in one piece goes to h11, and what h11 then
    holds after it too (to the app, whose own ApiKey refuses them: this app, which checks no key, answers them);
    once h11 holds nothing, heads are screened again."""
    seen: list[str] = []
    whole = request(body=b'{"text": ["' + b"x" * 5000 + b'"]}')
    cut = len(whole) - 3000
    chunks = (whole[:cut], whole[cut:-10], whole[-10:] + request("/refused"), request("/split")[:40])
    chunks += (request("/split")[40:] + request("/held"), request("/screened"))
    assert statuses(feed(recording_app(seen), access, *chunks)) == [429, 429, 200, 200, 429]
    assert seen == ["/split", "/held"]


def test_the_answer_from_the_head_is_the_apps_own_byte_for_byte(access):
    """Through the real app, with and without the screen: a client cannot tell which answered it."""
    app = create_app(EnglishGerman(access=access))
    for path in ("/translate", "/v2/translate", "/v1/chat/completions", "/translator/translate", "/no/such/path"):
        seen_by_app = feed(app, None, request(path))
        from_head = feed(app, access, request(path))
        assert statuses(from_head) == [429] and from_head == seen_by_app, path


@pytest.mark.parametrize(
    "raw",
    [
        request(**{"Transfer-Encoding": "chunked"}),  # a body framed otherwise than by Content-Length
        request(**{"Expect": "100-continue"}),
        request(**{"Connection": "close"}),
        request(**{"Origin": "https://page.example"}),  # the Origin check (and CORS) answer first
        request().replace(b"Host: 127.0.0.1", b"Host: evil.example"),  # the Host check answers first (400)
        request().replace(b"Host: 127.0.0.1\r\n", b""),  # h11's 400: no Host
        request().replace(b"POST /translate", b"POST /health"),  # an open path
        request(key="not-a-key"),  # no key: ApiKey's 401, after the body for some APIs
        request(key=FREE),  # within its limits
    ],
)
def test_heads_the_screen_does_not_answer_reach_h11_and_the_app(access, raw):
    seen: list[str] = []
    written = feed(recording_app(seen), access, raw)
    assert seen or statuses(written) == [400], written[:200]


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"POST /t HTTP/1.1\nHost: a\n\n", "bare LF line ends"),
        (b"POST /t HTTP/1.0\r\nHost: a\r\n\r\n", "HTTP/1.0"),
        (b"HEAD /t HTTP/1.1\r\nHost: a\r\n\r\n", "HEAD, whose answer has no body"),
        (b"POST http://a/t HTTP/1.1\r\nHost: a\r\n\r\n", "absolute form"),
        (b"POST /t HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n folded\r\n\r\n", "obsolete line folding"),
        (b"POST /t HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n", "space before the colon"),
        (b"POST /t HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "two Host headers"),
        (b"POST /t HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", "two lengths"),
        (b"POST /t HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", "a signed length"),
        (b"POST /t HTTP/1.1\r\nHost: a\r\nX-A: \x00\r\n\r\n", "a NUL in a value"),
        (b"POST /t HTTP/1.1\r\nHost: a\r\n", "a head not yet whole"),
    ],
)
def test_a_head_h11_might_read_otherwise_is_not_read(raw, why):
    assert read_head(raw) is None, why


def test_a_head_is_read_as_uvicorn_gives_it_to_the_app():
    head = read_head(b"POST /a%20b?x=1 HTTP/1.1\r\nHost: h\r\nX-Api-Key:  k \r\nContent-Length: 12\r\n\r\nbody")
    assert head is not None and head.path == "/a b" and head.size == 73 and head.body == 12
    assert head.headers == {b"host": b"h", b"x-api-key": b"k", b"content-length": b"12"}


def test_a_server_without_keys_screens_nothing():
    assert head_refusal(Access()) is None


def test_serve_gives_its_connections_the_screen(access, monkeypatch):
    """What `mtkit serve` hands uvicorn as its HTTP protocol refuses from the head (uvicorn's run is not started)."""
    from mtkit.serve import server
    from mtkit.serve.service import ServeSettings

    built: dict = {}
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: built.update(config=self.config))
    server.serve(ServeSettings(models=("unused.pt",), access=access), "127.0.0.1", 0)
    seen: list[str] = []
    written = feed(recording_app(seen), None, request(), protocol_cls=built["config"].http)
    assert statuses(written) == [429] and seen == []


def test_the_real_server_refuses_from_the_head_on_a_kept_connection(cli_model, tmp_path):
    """`mtkit serve --api-keys`: past its limit, each API's 429 on one kept-alive connection, then a free key's
    request on the same connection is served; the same refusal sent chunked (read by h11 and the app) is alike."""
    keys = f"{LIMITED} name=limited requests_per_minute=1\n{FREE} name=free\n"
    srv = keyed_server(cli_model, tmp_path, keys)
    try:
        with httpx.Client(base_url=srv.url, timeout=60) as http:
            limited = {"Authorization": f"Bearer {LIMITED}"}
            assert http.post("/translate", json={"text": ["a"]}, headers=limited).status_code == 200
            shapes = {"/translate": "error", "/v2/translate": "message", "/v1/chat/completions": "error"}
            for path, field in shapes.items():
                refused = http.post(path, json={"text": ["a"]}, headers=limited)
                assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
                assert field in refused.json(), path
            free = http.post("/translate", json={"text": ["a"]}, headers={"Authorization": f"Bearer {FREE}"})
            assert free.status_code == 200 and http.get("/health").status_code == 200
        with connect(srv) as sock:
            chunked = request(body=b"").replace(b"Content-Length: 0", b"Transfer-Encoding: chunked")
            sock.sendall(chunked + b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY))
            answer = sock.recv(65536)
            while len(answer) < answer.find(b"\r\n\r\n") + 4 + int(re.findall(rb"content-length: (\d+)", answer)[0]):
                answer += sock.recv(65536)  # the app writes the head and the body apart
        assert answer.startswith(b"HTTP/1.1 429 ") and b"requests a minute is reached" in answer
    finally:
        srv.stop()
