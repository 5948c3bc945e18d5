"""Connections of `mtkit serve`: how many it keeps, how long a request may take to arrive, one log line per cause.

uvicorn's own settings are used where they exist: `timeout_keep_alive` (an idle keep-alive
connection is closed), h11's `max_incomplete_event_size` (a request head over 16 KiB is
refused with 400), `backlog`. Two things uvicorn does not do are written here, as nginx does them:

- A read timeout (nginx's client_header_timeout and client_body_timeout, 60 s each): uvicorn
  starts its keep-alive clock only after a first answer, so a client that connects and sends
  nothing, or a header line a minute, holds its connection for ever. Here a request must have
  arrived whole (head and body) within `read_timeout_s` of its connection or its first byte;
  a head still incomplete then gets 408, a body cut short is a disconnect.
- A connection limit (nginx's worker_connections) below the process's descriptor limit, kept where
  descriptors are taken: at accept (`ListeningSocket`, the socket uvicorn serves on). At the limit a
  new connection first closes one that waits idle, nginx's answer to running short
  (ngx_drain_connections), so a probe's /health and a good client get in while idle sockets pile up;
  it is accepted once that one's descriptor is back. Idle means no request being answered, nothing
  waiting unread, and no byte received for IDLE_AFTER_S (half the read timeout where that is
  shorter): a kept-alive client about to send its next request, or a new one whose request is still
  on its way, is not idle (closing it would reset a request it sent). Unlike nginx, connections that
  never got an answer go first (quiet longest first), kept-alive ones of clients already served
  after them: sockets opened to hold the server's descriptors never finish a request. When no
  connection is idle, up to REFUSE_ROOM more are accepted to be refused: each one's request head is
  read, `/health` answered as usual, any other request waits up to IDLE_AFTER_S for an idle
  connection to close in its stead (then it is served as usual), else is answered 503 with
  `Retry-After` and `Connection: close`; the server then half-closes and reads until the client
  closes (or LINGER_S), since closing a socket with a request unread resets it and the client would
  lose the 503. The rest wait in the listen queue. At SIGTERM, every accepted connection whose
  request was not read whole (waiting for room, or still arriving) is answered 503 the same way.
  Which connections are to be refused is kept per socket, so a connection never accepted takes no
  count with it. uvicorn's `limit_concurrency` is not used: it answers 503 after a connection was
  accepted and its request read, which keeps no descriptor free, and it refuses /health as well.

A request past its key's limit is answered from its head, before h11 and the app (`screen`, from
mtkit/serve/app.py), where the head is plain enough that h11 would read it alike: mtkit/serve/heads.py.

What clients do wrong is logged once per cause and then counted (`OncePerCause`), not a line
(or an asyncio traceback) per event: a few hundred idle sockets must not write megabytes of log.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import resource
import socket
import struct
import termios
import time
from dataclasses import dataclass, field
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from mtkit.serve.heads import MAX_HEAD_BYTES, Screen, ScreenedHeads

logger = logging.getLogger(__name__)

# Descriptors kept for the process itself (model files, logs, torch's threads, the listening socket).
RESERVED_FDS = 64
REFUSE_ROOM = 16  # connections accepted past the limit, when none is idle, only to be answered 503 and closed
IDLE_AFTER_S = 2.0  # a connection with nothing to answer that received no byte for this long may be closed
WAIT_STEP_S = 0.1  # how often a refused request looks for an idle connection to take the place of
LINGER_S = 2.0  # after a 503, how long a refused connection waits for its client to close first
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
    refusing: set[int] = field(default_factory=set)  # descriptors accepted while none was idle, to be refused

    @property
    def quiet_s(self) -> float:
        """How long a connection must have sent nothing to count as idle: IDLE_AFTER_S, or half the read timeout
        where that is shorter (else every silent connection would be timed out before it could count)."""
        return min(IDLE_AFTER_S, self.read_timeout_s / 2)

    @property
    def refused_room(self) -> bool:
        """Whether one more connection may be accepted to be refused (REFUSE_ROOM past the limit)."""
        return self.accepted < self.max_connections + REFUSE_ROOM

    def make_room(self) -> bool:
        """At the limit: close idle connections (never answered first, then quiet longest); whether one may be
        accepted now, to be refused (`refusing`) as none was idle."""
        live = [p for p in self.protocols if not p.transport.is_closing()]
        closing = self.accepted - len(live)  # their descriptors come back within a loop turn
        over = self.accepted - closing - self.max_connections + 1
        if over <= 0:  # closing ones make room: wait for them
            return False
        if self.close_idle(over):
            logger.warning(
                "%d connections reached (--max-connections): closing idle ones, oldest first.", self.max_connections
            )
            return False  # accepted once their descriptors are back
        if not self.refused_room:
            return False
        logger.warning(
            "every connection (--max-connections %d) is busy; new ones wait for an idle one, or get 503.",
            self.max_connections,
        )
        return True

    def close_idle(self, n: int) -> bool:
        """Close up to `n` idle connections, never answered first, then quiet longest; whether any was idle."""
        now, quiet = time.monotonic(), self.quiet_s
        live = [p for p in self.protocols if not p.transport.is_closing()]
        idle = sorted((p for p in live if _idle(p, now, quiet)), key=lambda p: (p._served, p._since))
        for p in idle[:n]:
            _close(p)
        return bool(idle)


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
        refuse = limits.accepted >= limits.max_connections
        if refuse and not limits.make_room():
            raise BlockingIOError  # asyncio tries again at its next turn, when the closed ones are gone
        conn, address = super().accept()  # BlockingIOError when nobody was waiting: nothing counted then
        limits.accepted += 1
        if refuse:
            limits.refusing.add(conn.fileno())
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


def _idle(protocol: Any, now: float, quiet: float = IDLE_AFTER_S) -> bool:
    """No request being answered, nothing unread, no byte for `quiet` seconds: a connection that may be closed."""
    answering = protocol.cycle is not None and not protocol.cycle.response_complete
    if (
        answering
        or getattr(protocol, "_waiting", False)
        or getattr(protocol, "_dropping", 0)
        or protocol.conn.their_state is not h11.IDLE
        or now - protocol._since < quiet
    ):
        return False
    return _unread(protocol.transport) == 0


def _unread(transport: asyncio.BaseTransport) -> int:
    """Bytes the client sent that wait in the kernel, not yet read (FIONREAD); closing over them resets the client."""
    sock = transport.get_extra_info("socket")
    try:
        return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0])
    except (OSError, AttributeError, ValueError):
        return 1  # unknown: not idle


def _health_probe(head: bytes) -> bool:
    """Whether a request head is `GET /health` (or HEAD), which a refused connection still answers."""
    method, _, rest = head.partition(b" ")
    target = rest.partition(b" ")[0].partition(b"?")[0]
    return method in (b"GET", b"HEAD") and target == b"/health"


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


def protocol_class(limits: ConnectionLimits, screen: Screen | None = None) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the read timeout of `limits`, counting connections for `ListeningSocket`, and
    with `screen`, answering what it refuses from the head (module docstring)."""

    class LimitedH11(ScreenedHeads, H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            self._read_timer: asyncio.TimerHandle | None = None
            self._since = time.monotonic()  # when it last received a byte or became idle: quiet longest goes first
            self._served = 0  # answers given: a client that got one is kept over one that never asked
            self._refused: bytearray | None = None  # the head read so far of a connection accepted to be refused
            self._refused_done = False  # answered 503: what else it sends is dropped until it closes
            self._waiting = False  # a refused connection's whole head read: waiting for room, or a 503
            self.screen, self._dropping = screen, 0  # ScreenedHeads': what it answers, a body it still drops
            super().connection_made(transport)
            limits.protocols = self.connections  # uvicorn's set of live connections
            sock = transport.get_extra_info("socket")
            if sock is not None and sock.fileno() in limits.refusing:  # accepted only to be refused: none was idle
                limits.refusing.discard(sock.fileno())
                self._refused = bytearray()
            self._arm()

        def _refuse(self, data: bytes) -> None:
            """Read a refused connection's request: /health goes on as usual; any other waits up to IDLE_AFTER_S
            for an idle connection to close in its stead (then it goes on as usual too), else gets 503."""
            assert self._refused is not None
            self._refused += data
            if self._waiting:
                return
            if b"\r\n\r\n" not in self._refused and len(self._refused) < MAX_HEAD_BYTES:
                return
            if _health_probe(bytes(self._refused)):
                self._go_on()
                return
            self._waiting = True
            self._disarm()
            self._wait_for_room(self.loop.time() + IDLE_AFTER_S)

        def _wait_for_room(self, until: float) -> None:
            self._read_timer = None
            if self.transport.is_closing():
                return
            if limits.close_idle(1):
                self._go_on()
            elif self.loop.time() >= until:
                self._answer_503()
            else:
                self._read_timer = self.loop.call_later(WAIT_STEP_S, self._wait_for_room, until)

        def _go_on(self) -> None:
            """Hand what a refused connection sent to uvicorn: it is served as any other."""
            assert self._refused is not None
            sent, self._refused, self._waiting = bytes(self._refused), None, False
            self.data_received(sent)

        def _answer_503(self, message: str = "the server is busy; retry.") -> None:
            self._disarm()
            self._refused, self._refused_done = None, True  # `_waiting` stays: never taken for an idle one
            self.transport.write(_raw_answer(503, "Service Unavailable", message, 1))
            if self.transport.can_write_eof():
                self.transport.write_eof()  # the client reads the answer; it closes, then so do we
            self._read_timer = self.loop.call_later(LINGER_S, self.transport.close)

        def shutdown(self) -> None:
            """SIGTERM: a connection whose request is not (wholly) read yet, waiting for room or still arriving, is
            answered 503 with Retry-After, as past the limit, rather than closed unanswered (a request being
            answered finishes first, as uvicorn does; a kept-alive connection between requests is closed)."""
            idle = self._served and not self._dropping and not self.conn.trailing_data[0]  # only screened answers
            unread = (self.cycle is None and not idle) or (
                self.cycle is not None and self.cycle.response_complete and bool(self.conn.trailing_data[0])
            )
            if not self._refused_done and not self.transport.is_closing() and (self._refused is not None or unread):
                self._answer_503("the server is shutting down; retry.")
                return
            super().shutdown()

        def _arm(self) -> None:
            self._disarm()
            self._read_timer = self.loop.call_later(limits.read_timeout_s, self._read_timed_out)

        def _disarm(self) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
                self._read_timer = None

        def data_received(self, data: bytes) -> None:
            self._since = time.monotonic()
            if self._refused_done:
                return  # the rest of a refused request: read and dropped until the client closes
            if self._refused is not None:
                self._refuse(data)
                return
            if self.screen is not None and not (data := self._screened(data)):
                return
            if self._read_timer is None and self.conn.their_state is h11.IDLE:
                self._arm()  # the next request on a kept-alive connection starts: its clock too
            super().data_received(data)
            if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
                self._disarm()  # read whole (or the connection is done with): the read timeout is over

        def on_response_complete(self) -> None:
            self._since, self._served = time.monotonic(), self._served + 1
            super().on_response_complete()

        def eof_received(self) -> None:
            if self._refused_done:
                self.transport.close()  # the client read its 503 and closed
            super().eof_received()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            limits.accepted -= 1
            super().connection_lost(exc)

        def _read_timed_out(self) -> None:
            self._read_timer = None
            if self.transport.is_closing():
                return
            if self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE and not self._dropping:
                if self.conn.trailing_data[0]:  # part of a head: say why, as nginx's 408
                    message = f"the request was not sent whole within {limits.read_timeout_s:g} s."
                    self.transport.write(_raw_answer(408, "Request Timeout", message))
                logger.info("closed connections that sent no whole request within %g s.", limits.read_timeout_s)
            else:
                logger.info("closed connections whose request body did not arrive within %g s.", limits.read_timeout_s)
            _close(self)

    return LimitedH11
