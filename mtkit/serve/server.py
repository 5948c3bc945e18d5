"""Run the app under uvicorn on a socket bound here, and leave with exit code 0 after SIGTERM or SIGHUP.

The socket is bound before uvicorn starts so that `--port 0` (an ephemeral port, for tests)
can be said in the log line "listening on http://HOST:PORT", and so that a port in use is
one clear sentence. uvicorn drains on SIGTERM (no new connections, requests in flight
answered, then the app's shutdown finishes the queue) and then raises the signal again to
die by it; a handler installed here takes that second SIGTERM, so the process exits 0.
The drain is bounded by --drain-timeout: past it, what is still waiting is answered 503
(mtkit/serve/service.py), so the process is gone before the scheduler's SIGKILL. SIGHUP (the
terminal or ssh session closed) drains the same way: uvicorn handles only SIGINT and SIGTERM,
and Python's default for SIGHUP is to die with the requests in flight unanswered.
Connections are limited and timed as mtkit/serve/connections.py says.
"""

from __future__ import annotations

import logging
import math
import signal
import socket
from types import FrameType

from mtkit.errors import MtkitError
from mtkit.serve.connections import ConnectionLimits, ListeningSocket, connection_limit, protocol_class, quiet_repeats
from mtkit.serve.guard import API_KEY_ENV, is_loopback
from mtkit.serve.heads import MAX_HEAD_BYTES
from mtkit.serve.service import ServeSettings, Service

logger = logging.getLogger(__name__)

# uvicorn closes an idle keep-alive connection after 5 s by default, the very time after which
# httpx (and others) stop reusing one: a request sent on it as the server closes it fails with a
# read error. Keeping connections longer than clients do leaves that race to the client's side.
KEEP_ALIVE_S = 65
# After the drain time, requests are answered 503 (service.py); uvicorn cancels what is left this much later.
ANSWER_S = 2.0
# Connections the kernel holds until the server accepts them (uvicorn's default backlog).
BACKLOG = 2048
# The stdlib event loop, said even where uvloop is installed (uvicorn's default, "auto", would take it): uvloop
# accepts connections in libuv's C, never calling ListeningSocket.accept, so the connection limit would be gone.
LOOP = "asyncio"
# The loggers whose messages about clients (bad requests, timeouts, disconnects) are said once per cause.
NOISY_LOGGERS = (
    "uvicorn.error",
    "asyncio",
    "mtkit.serve.app",
    "mtkit.serve.http",
    "mtkit.serve.guard",
    "mtkit.serve.service",
    "mtkit.serve.connections",
)


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port), or one sentence on why it cannot be."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        raise MtkitError(f"cannot listen on {host}:{port}: {exc.strerror or exc}.") from None
    return sock


def _terminated(signum: int, frame: FrameType | None) -> None:
    """uvicorn raises SIGTERM again after draining; by then all is done, so this returns and main exits 0."""


def serve(settings: ServeSettings, host: str, port: int) -> None:
    """Serve until SIGTERM or Ctrl-C; raise MtkitError if the model cannot be loaded."""
    import uvicorn

    from mtkit.serve.app import create_app, head_refusal

    sock = bind(host, port)
    sock.listen(BACKLOG)  # now, not when uvicorn starts: a client told "listening on" is never refused meanwhile
    address, port = sock.getsockname()[:2]
    service = Service(settings)
    server: uvicorn.Server | None = None

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            service.begin_drain()  # the clock starts at SIGTERM, not when the connections are closed
            await super().shutdown(sockets)

    def stop() -> None:
        if server is not None:
            server.should_exit = True

    app = create_app(service, on_load_failure=stop)
    limits = ConnectionLimits(connection_limit(settings.max_connections), settings.read_timeout_s)
    server = Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            http=protocol_class(limits, head_refusal(settings.access)),
            loop=LOOP,
            timeout_keep_alive=KEEP_ALIVE_S,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
            timeout_graceful_shutdown=math.ceil(settings.drain_timeout_s + ANSWER_S),
        )
    )
    quiet_repeats(*NOISY_LOGGERS)
    where = f"[{host}]" if ":" in host else host
    logger.info("listening on http://%s:%d (loading %s)", where, port, settings.name)
    if not settings.access.keys.required and not is_loopback(address):
        logger.warning(
            "%s is reachable from other machines and no API key is set: anyone who can reach it can use "
            "its CPU; set one with --api-key-file or $%s.",
            where,
            API_KEY_ENV,
        )

    def hung_up(signum: int, frame: FrameType | None) -> None:
        logger.info("SIGHUP: draining as for SIGTERM.")
        if server is not None:
            server.handle_exit(signal.SIGTERM, frame)

    previous = {
        sig: signal.signal(sig, handler) for sig, handler in ((signal.SIGTERM, _terminated), (signal.SIGHUP, hung_up))
    }
    try:
        server.run(sockets=[ListeningSocket.wrap(sock, limits)])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
    if service.error:
        raise MtkitError(service.error)
    logger.info("stopped.")
