"""Requests answered from their heads, before h11 and the app: a key past its requests a minute (`screen`).

A client that keeps sending past its limit would otherwise cost the server, per refusal, h11's
parsing, an asyncio task and the whole ASGI stack, on the core the model also decodes on. The
connection (mtkit/serve/connections.py, whose protocol takes `ScreenedHeads`) reads a request's head
here, asks `screen` (mtkit/serve/app.py: the guard's own decision and the app's own answer), writes
the answer as uvicorn and h11 write one, reads the body past and keeps the connection.

Only a head that h11 would read the same way is answered so: HTTP/1.1 and not HEAD, CRLF lines
matching RFC 9112's grammar, one Host, its body framed by at most one Content-Length (no
Transfer-Encoding, Expect, Upgrade or `Connection: close`), whole in what arrived. Anything else goes
to h11 and the app as before, which answer it alike, so no request is framed otherwise than h11 would
(no smuggling past this reading), and a malformed head still gets h11's 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, NamedTuple, Protocol
from urllib.parse import unquote

import h11

# A request head (request line and headers) over this many bytes gets 400 from h11 (its default, said here, and
# given to uvicorn by mtkit/serve/server.py; nginx's large_client_header_buffers is 4 of 8 KiB); no longer a head is
# read here, nor by a connection past the limit (mtkit/serve/connections.py).
MAX_HEAD_BYTES = 16 * 1024
# RFC 9112's request line (origin form, HTTP/1.1 only) and header field lines, as h11 reads them: a head that does
# not match goes to h11, never answered here.
_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_VCHAR = rb"[\x21-\x7e\x80-\xff]"
REQUEST_LINE = re.compile(rb"(" + _TOKEN + rb") (/[\x21-\x7e]*) HTTP/1\.1")
HEADER_LINE = re.compile(rb"(" + _TOKEN + rb"):[ \t]*(" + _VCHAR + rb"+(?:[ \t]+" + _VCHAR + rb"+)*)?[ \t]*")
# A head with one of these is left to h11 and the app: its body is not framed by Content-Length alone, or it asks
# for more than an answer (100 Continue, a new protocol).
UNSCREENED = (b"transfer-encoding", b"expect", b"upgrade")


class Answer(Protocol):
    """What a screen answers with: a Starlette Response has these."""

    status_code: int
    body: bytes

    @property
    def raw_headers(self) -> list[tuple[bytes, bytes]]: ...


# screen(path, headers) -> the answer to a request from its head alone, or None to serve it as usual. Headers by
# lower-case name, the last of a name winning, as the app's guard reads them.
Screen = Callable[[str, dict[bytes, bytes]], Answer | None]


class Head(NamedTuple):
    path: str  # as uvicorn gives it to the app: the target before "?", percent-decoded
    headers: dict[bytes, bytes]
    size: int  # bytes of the head, its blank line included
    body: int  # Content-Length


def read_head(data: bytes, at: int = 0) -> Head | None:
    """The head at `at` in `data` if it is whole there and h11 would read it alike (module docstring), else None."""
    end = data.find(b"\r\n\r\n", at, at + MAX_HEAD_BYTES)
    if end < 0:
        return None
    first, *lines = data[at:end].split(b"\r\n")
    request = REQUEST_LINE.fullmatch(first)
    if request is None or request[1] == b"HEAD":  # an answer to HEAD has no body: h11 writes it
        return None
    headers: dict[bytes, bytes] = {}
    for line in lines:
        field = HEADER_LINE.fullmatch(line)
        if field is None:
            return None
        name, value = field[1].lower(), field[2] or b""
        if name in UNSCREENED or (name in (b"host", b"content-length") and name in headers):
            return None
        if name == b"connection" and b"close" in value.lower():
            return None
        headers[name] = value
    length = headers.get(b"content-length", b"0")
    if b"host" not in headers or not length.isdigit() or len(length) > 18:
        return None
    target = request[2].partition(b"?")[0]
    return Head(unquote(target.decode("ascii")), headers, end + 4 - at, int(length))


def answer_bytes(answer: Answer, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """`answer` as HTTP/1.1, as uvicorn and h11 write a response: the server's headers (date, server) first."""
    status = answer.status_code
    lines = [b"HTTP/1.1 %d %s\r\n" % (status, HTTPStatus(status).phrase.encode())]
    lines += [name + b": " + value + b"\r\n" for name, value in (*default_headers, *answer.raw_headers)]
    return b"".join(lines) + b"\r\n" + answer.body


class ScreenedHeads:
    """The part of the server's protocol (uvicorn's H11Protocol, mtkit/serve/connections.py) that answers requests
    from their heads; the protocol sets `screen` and `_dropping` when a connection is made, and hands each chunk it
    receives to `_screened` first."""

    screen: Screen | None
    _dropping: int  # bytes still to come of the body of a request answered from its head
    # uvicorn's H11Protocol's, and the connection's read timer (mtkit/serve/connections.py)
    cycle: Any
    conn: Any
    flow: Any
    transport: Any
    server_state: Any
    on_response_complete: Callable[[], None]
    _unset_keepalive_if_required: Callable[[], None]
    _arm: Callable[[], None]
    _disarm: Callable[[], None]

    def _screened(self, data: bytes) -> bytes:
        """Answer the requests at the start of `data` that `screen` refuses from their heads, dropping their
        bodies; what is left (from the first request it does not refuse) is for h11."""
        assert self.screen is not None
        at = 0  # where the next request starts in `data` (offsets, not slices: a pipelined flood is not copied)
        while at < len(data):
            if self._dropping:
                dropped = min(self._dropping, len(data) - at)
                self._dropping -= dropped
                at += dropped
                if not self._dropping:
                    self._disarm()
                continue
            if not self._between_requests() or (head := read_head(data, at)) is None:
                break
            answer = self.screen(head.path, head.headers)
            if answer is None:
                break
            self._unset_keepalive_if_required()
            self.transport.write(answer_bytes(answer, self.server_state.default_headers))
            self.on_response_complete()  # as uvicorn after an answer: its count, the keep-alive clock
            end = at + head.size + head.body
            self._dropping, at = max(0, end - len(data)), min(end, len(data))
            if self._dropping:
                self._arm()  # the rest of the body must come within the read timeout too
            else:
                self._disarm()
        return data[at:] if at else data

    def _between_requests(self) -> bool:
        """Nothing of a request read and nothing being answered: the next bytes start a request. Not while the
        client leaves answers unread (the transport's buffer full): h11 and uvicorn then hold back."""
        return (
            (self.cycle is None or self.cycle.response_complete)
            and self.conn.their_state is h11.IDLE
            and self.conn.our_state is h11.IDLE
            and not self.conn.trailing_data[0]
            and not self.flow.write_paused
            and not self.transport.is_closing()
        )
