"""Who may talk to `mtkit serve`: the Host and Origin headers, the API key, and one JSON line for any failure.

A server on 127.0.0.1 is still reachable from every web page the user's browser opens: a
page can POST to it (a form or a text/plain fetch needs no preflight), and a DNS-rebinding
page (its own name re-pointed at 127.0.0.1) can even read the answers. So, as Starlette's
TrustedHostMiddleware and Django's ALLOWED_HOSTS do, a request whose Host is not a name this
server answers to gets 400 (a rebinding page always sends its own name); one sent from a web
page whose Origin was not allowed with --allow-origin gets 403; and with an API key, a request
without it gets 401. The checks are plain ASGI middleware, so they run before any body is read.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
import stat
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtkit.errors import MtkitError
from mtkit.serve.keys import Key, KeyFile, Keys, OverLimit

logger = logging.getLogger(__name__)

API_KEY_ENV = "MTKIT_SERVE_API_KEY"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
WILDCARD_BINDS = ("0.0.0.0", "::", "")
# Open without a key: probes (a load balancer, Kubernetes) call /health, and it says only ready / loading /
# failing; / is the page that asks for the key, and /languages lists language codes; /frontend/settings and /spec
# say what LibreTranslate's web page and its clients read before they have a key (all four open in LibreTranslate).
OPEN_PATHS = ("/health", "/", "/languages", "/frontend/settings", "/spec")
# A translated file's link (/translate_file's answer): its 128 random bits let its holder download it, as in
# LibreTranslate, whose web page follows the link without a key.
OPEN_PREFIXES = ("/download_file/",)
# Endpoints that check the key themselves, in their API's own shapes: LibreTranslate's clients send it in the body
# (`api_key`: mtkit/serve/libretranslate.py), DeepL's and OpenAI's clients want their own error bodies. They are told
# by `scope["state"]["key"]` which key a header carried (None: none, or none valid), and check it with
# mtkit/serve/http.py's `authorize`.
BODY_KEY_PATHS = ("/translate", "/detect", "/translate_file", "/suggest")
SELF_CHECKED_PREFIXES = ("/v1/", "/v2/")
NEEDS_KEY = "this server needs an API key: send it as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'."
ORIGIN = re.compile(r"^[a-z][a-z0-9+.-]*://[^/\s]+$")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _bracketed(name: str) -> str:
    """IPv6 addresses as a Host header writes them: [::1]."""
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def host_name(header: str) -> str:
    """The name in a Host header, without its port: "[::1]:5000" -> "[::1]", "Example.org:80" -> "example.org"."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[: header.find("]") + 1] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """Whether a listening address (not a name to resolve) reaches this machine only."""
    ip = _ip(host)
    return host.lower() == "localhost" or (ip is not None and ip.is_loopback)


@dataclass(frozen=True)
class Access:
    """The server's rules for who may call it; the key never appears in a repr or in /info."""

    bind: str = "127.0.0.1"  # --host
    hosts: tuple[str, ...] = ()  # --allow-host: more names for the Host header; "*" takes any
    origins: tuple[str, ...] = ()  # --allow-origin: web pages that may call the server; "*" any
    api_key: str | None = field(default=None, repr=False)
    key_file: KeyFile | None = field(default=None, repr=False, compare=False)  # --api-keys: many keys, with limits
    keys: Keys = field(init=False, repr=False, compare=False)  # every key, and what each has used

    def __post_init__(self) -> None:
        origins = tuple(o.strip().lower().rstrip("/") for o in self.origins)
        for given, origin in zip(self.origins, origins):
            if origin not in ("*", "null") and not ORIGIN.match(origin):
                raise MtkitError(
                    f"--allow-origin {given!r} is not an origin; write it as a browser sends it, "
                    "like https://app.example.org or http://localhost:8080 (no path)."
                )
        object.__setattr__(self, "origins", origins)
        for given in self.hosts:
            check_host_pattern(given)
        object.__setattr__(self, "hosts", tuple(host_name(_bracketed(h)) for h in self.hosts))
        object.__setattr__(self, "keys", Keys(self.api_key, self.key_file))

    def host_allowed(self, header: str) -> bool:
        """Loopback names, --host, --allow-host; any IP address when listening on all of them.

        An IP address in Host cannot come from DNS rebinding (the browser sends the attacker's
        name), so a server bound to 0.0.0.0 answers clients that address it by any of its IPs.
        """
        name = host_name(header)
        if "*" in self.hosts:
            return True
        if not name:
            return False
        if name in LOOPBACK_NAMES or name in self.hosts or name == host_name(_bracketed(self.bind)):
            return True
        if any(h.startswith("*.") and name.endswith(h[1:]) for h in self.hosts):  # a subdomain, as Starlette's
            return True
        ip = _ip(name)
        return ip is not None and (ip.is_loopback or self.bind in WILDCARD_BINDS)

    def origin_allowed(self, origin: str, host: str = "") -> bool:
        """--allow-origin's pages, and the server's own page (GET /): its Origin names the Host it was loaded from,
        which has passed `host_allowed` (a DNS-rebinding page's Origin and Host both name the attacker's host)."""
        origin = origin.lower().rstrip("/")
        same = bool(host) and origin in (f"http://{host.strip().lower()}", f"https://{host.strip().lower()}")
        return same or "*" in self.origins or origin in self.origins

    def header_key(self, headers: dict[bytes, bytes]) -> Key | None:
        """The key a header carries: `Authorization: Bearer KEY` (mtkit's, OpenAI's), `Authorization:
        DeepL-Auth-Key KEY` (DeepL's) or `X-API-Key: KEY`; None when none is one of the keys."""
        scheme, _, token = headers.get(b"authorization", b"").strip().partition(b" ")
        if scheme.lower() in (b"bearer", b"deepl-auth-key") and token.strip():
            return self.keys.find(token.strip())
        given = headers.get(b"x-api-key", b"").strip()
        return self.keys.find(given) if given else None

    def key_given(self, headers: dict[bytes, bytes]) -> bool:
        """Whether a header carries one of the keys (compared in constant time)."""
        return self.header_key(headers) is not None


def check_host_pattern(given: str) -> None:
    """--allow-host takes a name, `*`, or `*.example.org` (any subdomain), as Starlette's TrustedHostMiddleware."""
    pattern = given.strip().lower()
    if "*" in pattern and pattern != "*" and (not pattern.startswith("*.") or "*" in pattern[1:] or len(pattern) < 3):
        raise MtkitError(
            f"--allow-host {given!r}: a wildcard is `*` (any name) or `*.example.org` (any name under "
            "example.org), as in Starlette's TrustedHostMiddleware."
        )


def key_file_text(path: str) -> str:
    """The key on the first line of the file, warning when others may read it (docs/serving.md asks for 0600)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
        mode = file.stat().st_mode
    except (OSError, UnicodeDecodeError) as exc:
        raise MtkitError(f"cannot read the API key file {path}: {getattr(exc, 'strerror', None) or exc}.") from None
    if mode & 0o077 and os.name == "posix":
        logger.warning(
            "the API key file %s can be read by other users (mode %04o); make it private with chmod 600 %s.",
            path,
            stat.S_IMODE(mode),
            path,
        )
    lines = text.splitlines()
    return lines[0].strip() if lines else ""  # the first line, as --help says; what follows (a comment) is left


def load_api_key(path: str | None) -> str | None:
    """The key from --api-key-file (which wins) or $MTKIT_SERVE_API_KEY; None when neither is set.

    Not a command-line value: `ps` shows every process's arguments to every user of the host.
    """
    if path is None:
        key = os.environ.get(API_KEY_ENV, "").strip()
        where = f"${API_KEY_ENV}"
        if not key:
            return None
    else:
        key = key_file_text(path)
        where = f"the API key file {path}"
        if not key:
            raise MtkitError(f"{where} is empty; put the key on its first line.")
    if not (key.isascii() and key.isprintable()) or any(c.isspace() for c in key):
        raise MtkitError(f"{where} must hold one key of printable ASCII without spaces (it travels in a header).")
    return key


async def send_json(send: Send, status: int, message: str, headers: dict[str, str] | None = None) -> None:
    """`{"error": "one sentence."}` with its status, straight to the ASGI server."""
    body = json.dumps({"error": message}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _headers(scope: Scope) -> dict[bytes, bytes]:
    return {k.lower(): v for k, v in scope.get("headers", [])}


class HostAndOrigin:
    """Outermost check: a foreign Host (400) or a web page's Origin not allowed (403) goes no further."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app, self.access = app, access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = _headers(scope)
        host = headers.get(b"host", b"").decode("latin-1")
        if not self.access.host_allowed(host):
            shown = json.dumps(host[:100])
            logger.info("refused a request for Host %s (not this server's name).", shown)
            message = f"this server does not answer to the Host {shown}; its operator can allow it with --allow-host."
            return await send_json(send, 400, message)
        origin = headers.get(b"origin")
        if origin is not None and not self.access.origin_allowed(origin.decode("latin-1"), host):
            shown = json.dumps(origin.decode("latin-1")[:100])
            logger.info("refused a request from the web page origin %s.", shown)
            return await send_json(
                send, 403, f"requests from the web page origin {shown} are not allowed (see --allow-origin)."
            )
        return await self.app(scope, receive, send)


def too_many(path: str, exc: OverLimit) -> ASGIApp:
    """mtkit's own 429 (`{"error": ...}` with Retry-After), whatever the path's API."""

    async def answer(scope: Scope, receive: Receive, send: Send) -> None:
        await send_json(send, 429, exc.message, {"Retry-After": str(exc.retry_after)})

    return answer


def refused_from_head(access: Access, path: str, headers: dict[bytes, bytes]) -> OverLimit | None:
    """ApiKey's refusal of a key past its requests this minute, found from the head before the app is called
    (mtkit/serve/heads.py screens with it), where the checks before ApiKey would let the request through
    unchanged: its Host allowed and no Origin (so no CORS headers either), a path that needs a key, a key in a
    header. None in every other case: the request goes through the app as usual, which answers it."""
    if (
        not access.keys.required
        or b"origin" in headers
        or path in OPEN_PATHS
        or path.startswith(OPEN_PREFIXES)
        or not access.host_allowed(headers.get(b"host", b"").decode("latin-1"))
    ):
        return None
    key = access.header_key(headers)
    if key is None:
        return None
    try:
        access.keys.usage.check(key)
    except OverLimit as exc:
        return exc
    return None


class ApiKey:
    """Inside CORS (so a browser can read the 401): every path but /health needs the key, when there is one.

    A key a header carries that has used its requests this minute is refused here (429, in the shape `refuse`
    gives the path's API), from the header alone: the body is never read, parsed or looked at, so a client
    flooding the server past its limit costs it as little as a request can (most such requests are answered even
    before the app, from their heads: `refused_from_head`). Other refusals wait for the body
    where an API's contract wants it read first (LibreTranslate's 400 for a malformed request before a missing
    key's), and a key in the body (`api_key`, `auth_key`) can only be known there.
    """

    def __init__(self, app: ASGIApp, access: Access, refuse: Callable[[str, OverLimit], ASGIApp] = too_many) -> None:
        self.app, self.access, self.refuse = app, access, refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.access.keys.required:
            return await self.app(scope, receive, send)
        key = self.access.header_key(_headers(scope))
        state = scope.setdefault("state", {})
        state["api_key_ok"], state["key"] = key is not None, key
        path = scope.get("path", "")
        if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            return await self.app(scope, receive, send)
        if path in BODY_KEY_PATHS or path.startswith(SELF_CHECKED_PREFIXES):
            if key is not None:  # counted where the endpoint authorizes it, after its own checks of the body
                try:
                    self.access.keys.usage.check(key)
                except OverLimit as exc:
                    return await self.refuse(path, exc)(scope, receive, send)
            return await self.app(scope, receive, send)
        if key is None:
            return await send_json(send, 401, NEEDS_KEY, {"WWW-Authenticate": "Bearer"})
        try:
            self.access.keys.usage.admit(key)
        except OverLimit as exc:
            return await self.refuse(path, exc)(scope, receive, send)
        state["admitted"] = True
        return await self.app(scope, receive, send)


def one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


class CatchAll:
    """Any error that escapes the app: one log line (no traceback) and one JSON line to the client.

    Starlette's own handler answers in plain text and re-raises, so that uvicorn logs a traceback
    for every bad request a client can think up; this sits inside it and lets nothing through.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:  # noqa: BLE001 - the one place every unexpected error ends
            logger.error("%s %s failed: %s", scope.get("method"), scope.get("path"), one_line(exc))
            if not started:
                await send_json(send, 500, f"the server failed on this request ({type(exc).__name__}); it is logged.")
