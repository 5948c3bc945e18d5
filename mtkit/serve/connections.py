"""Connections of `mtkit serve`: how many it keeps, how long a request may take to arrive, one log line per cause.

uvicorn's own settings are used where they exist: `timeout_keep_alive` (an idle keep-alive
connection is closed), h11's `max_incomplete_event_size` (a request head over 16 KiB is
refused with 400), `backlog`. Two things uvicorn does not do are written here, as nginx does them:

- A read timeout (nginx's client_header_timeout and client_body_timeout, 60 s each): uvicorn
  starts its keep-alive clock only after a first answer, so a client that connects and sends
  nothing, or a header line a minute, holds its connection for ever. Here a request must have
  arrived whole (head and body) within `read_timeout_s` of its connection or its first byte;
  a head still incomplete then gets 408, a body cut short is a disconnect.
- A connection limit (nginx's worker_connections) below the process's descriptor limit,
  kept where descriptors are taken: at accept (`ListeningSocket`, the socket uvicorn serves
  on). At the limit a new connection first closes one that waits idle (nothing asked yet, or
  between two requests), nginx's answer to running short (ngx_drain_connections), so a probe's
  /health and a good client get in while idle sockets pile up; it is accepted once that one's
  descriptor is back. Unlike nginx, connections that never got an answer go first (oldest
  first), kept-alive ones of clients already served after them: sockets opened to hold the
  server's descriptors never finish a request. When every connection is busy with a request,
  a few more are accepted to be answered 503 and closed; the rest wait in the listen queue.
  uvicorn's `limit_concurrency` is not used: it answers 503 after a connection was accepted
  and its request read, which keeps no descriptor free, and it refuses /health as well.

What clients do wrong is logged once per cause and then counted (`OncePerCause`), not a line
(or an asyncio traceback) per event: a few hundred idle sockets must not write megabytes of log.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger(__name__)

# Descriptors kept for the process itself (model files, logs, torch's threads, the listening socket).
RESERVED_FDS = 64
REFUSE_ROOM = 16  # connections accepted past the limit, when all are busy, only to be answered 503 and closed
REPEAT_WINDOW_S = 60.0  # a cause is said again, with its count, at most this often


def descriptor_limit() -> int:
    """This process's soft limit of open files (RLIMIT_NOFILE); a large number where there is none."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def connection_limit(asked: int) -> int:
    """`--max-connections`, lowered to leave RESERVED_FDS of the descriptor limit free (said once if lowered)."""
    room = max(8, descriptor_limit() - RESERVED_FDS)
    if asked > room:
        logger.warning(
            "--max-connections %d is over what the open-file limit (ulimit -n %d) allows; using %d.",
            asked,
            descriptor_limit(),
            room,
        )
        return room
    return asked


@dataclass
class ConnectionLimits:
    """The limits, and the connections they hold now (shared by the listening socket and every protocol)."""

    max_connections: int = 512
    read_timeout_s: float = 60.0
    accepted: int = 0  # descriptors of connections accepted and not yet lost
    protocols: set[Any] = field(default_factory=set)  # uvicorn's set of live connections, once one is made
    refusing: int = 0  # connections accepted while all were busy, to be answered 503

    def make_room(self) -> bool:
        """At the limit: close idle connections (never answered first, then oldest); whether one may be accepted."""
        live = [p for p in self.protocols if not p.transport.is_closing()]
        closing = self.accepted - len(live)  # their descriptors come back within a loop turn
        over = self.accepted - closing - self.max_connections + 1
        if over <= 0:  # closing ones make room: wait for them
            return False
        idle = sorted((p for p in live if _idle(p)), key=lambda p: (p._served, p._since))
        for p in idle[:over]:
            _close(p)
        if idle:
            logger.warning(
                "%d connections reached (--max-connections): closing idle ones, oldest first.", self.max_connections
            )
            return False  # accepted once their descriptors are back
        if self.accepted >= self.max_connections + REFUSE_ROOM:
            return False
        logger.warning("every connection (--max-connections %d) is busy; new ones get 503.", self.max_connections)
        self.refusing += 1
        return True


class ListeningSocket(socket.socket):
    """The listening socket, accepting only while `limits` has room (asyncio calls its `accept`)."""

    limits: ConnectionLimits

    @classmethod
    def wrap(cls, sock: socket.socket, limits: ConnectionLimits) -> ListeningSocket:
        listening = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        listening.limits = limits
        return listening

    def accept(self) -> tuple[socket.socket, Any]:
        limits = self.limits
        if limits.accepted >= limits.max_connections and not limits.make_room():
            raise BlockingIOError  # asyncio tries again at its next turn, when the closed ones are gone
        conn, address = super().accept()
        limits.accepted += 1
        return conn, address


class OncePerCause(logging.Filter):
    """Let a message template through once, then at most once per REPEAT_WINDOW_S with how many were held back."""

    def __init__(self, window_s: float = REPEAT_WINDOW_S) -> None:
        super().__init__()
        self.window_s = window_s
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        now = time.monotonic()
        last, held = self._seen.get(key, (-float("inf"), 0))
        if now - last < self.window_s:
            self._seen[key] = (last, held + 1)
            return False
        self._seen[key] = (now, 0)
        if held:
            record.msg = f"{record.msg} ({held} more like this in the last {now - last:.0f} s)"
        return True


def quiet_repeats(*names: str) -> OncePerCause:
    """One OncePerCause on each named logger (uvicorn's, asyncio's, the serve modules'); returned for tests."""
    tally = OncePerCause()
    for name in names:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, OncePerCause)]:
            logger.removeFilter(old)  # a second server in the same process (tests) starts its own count
        logger.addFilter(tally)
    return tally


def loop_errors(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """asyncio's error handler, one line (no traceback): e.g. "socket.accept() out of system resource" (EMFILE)."""
    exc = context.get("exception")
    reason = f": {type(exc).__name__}: {exc}" if exc is not None else ""
    logging.getLogger("asyncio").error("%s%s", context.get("message", "event loop error"), reason)


def _idle(protocol: H11Protocol) -> bool:
    """No request being read or answered: a fresh connection (whatever it sent of a head) or one kept alive."""
    return (protocol.cycle is None or protocol.cycle.response_complete) and protocol.conn.their_state is h11.IDLE


def _close(protocol: H11Protocol) -> None:
    if not protocol.transport.is_closing():
        try:
            protocol.conn.send(h11.ConnectionClosed())
        except h11.LocalProtocolError:
            pass
        protocol.transport.close()


def _raw_answer(status: int, reason: str, message: str, retry_after: int | None = None) -> bytes:
    body = ('{"error": "' + message.replace('"', "'") + '"}').encode()
    head = f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
    head += f"retry-after: {retry_after}\r\n" if retry_after is not None else ""
    return (head + "connection: close\r\n\r\n").encode() + body


def protocol_class(limits: ConnectionLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the read timeout of `limits`, counting connections for `ListeningSocket`."""

    class LimitedH11(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            self._read_timer: asyncio.TimerHandle | None = None
            self._since = time.monotonic()  # when it last became idle: the oldest idle ones are closed first
            self._served = 0  # answers given: a client that got one is kept over one that never asked
            super().connection_made(transport)
            limits.protocols = self.connections  # uvicorn's set of live connections
            if limits.refusing:  # accepted only to be refused: every connection was busy
                limits.refusing -= 1
                transport.write(_raw_answer(503, "Service Unavailable", "the server is busy; retry.", 1))
                _close(self)
                return
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._read_timer = self.loop.call_later(limits.read_timeout_s, self._read_timed_out)

        def _disarm(self) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
                self._read_timer = None

        def data_received(self, data: bytes) -> None:
            if self._read_timer is None and self.conn.their_state is h11.IDLE:
                self._arm()  # the next request on a kept-alive connection starts: its clock too
            super().data_received(data)
            if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
                self._disarm()  # read whole (or the connection is done with): the read timeout is over

        def on_response_complete(self) -> None:
            self._since, self._served = time.monotonic(), self._served + 1
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            limits.accepted -= 1
            super().connection_lost(exc)

        def _read_timed_out(self) -> None:
            self._read_timer = None
            if self.transport.is_closing():
                return
            if self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE:
                if self.conn.trailing_data[0]:  # part of a head: say why, as nginx's 408
                    message = f"the request was not sent whole within {limits.read_timeout_s:g} s."
                    self.transport.write(_raw_answer(408, "Request Timeout", message))
                logger.info("closed connections that sent no whole request within %g s.", limits.read_timeout_s)
            else:
                logger.info("closed connections whose request body did not arrive within %g s.", limits.read_timeout_s)
            _close(self)

    return LimitedH11
