"""What every API adapter of `mtkit serve` does with HTTP alike: read a body within its limit, answer an error, notice
a client that left, tell whether a header carried the API key.

Each adapter (mtkit/serve/native.py, opennmt.py, libretranslate.py, ...) turns its protocol's
requests into calls of the Service (mtkit/serve/service.py) and its answers back into its
protocol's shapes; these are the pieces they share.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect

from mtkit.serve.guard import NEEDS_KEY, Access
from mtkit.serve.keys import Key
from mtkit.serve.payload import RequestError

logger = logging.getLogger(__name__)


def error_response(status: int, message: str, retry_after: int | None = None) -> JSONResponse:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


def media_type(request: Request) -> str:
    """The request's Content-Type without its parameters, lowercased ("" when none)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def check_content_type(request: Request) -> None:
    """JSON only (415 otherwise): a web page can send a form or text/plain cross-site without asking first."""
    media, *params = request.headers.get("content-type", "").split(";")
    given = [p.split("=", 1)[1].strip().strip('"').lower() for p in params if p.strip().lower().startswith("charset=")]
    charset = given[0] if given else "utf-8"
    if media.strip().lower() != "application/json" or charset not in ("utf-8", "utf8"):
        shown = media.strip()[:60] or "none"
        raise RequestError(415, f"the request body must be Content-Type: application/json (UTF-8), not {shown}.")


async def read_body(request: Request, limit: int, json_only: bool = True) -> bytes:
    """The whole body (JSON unless told), refused with 413 as soon as it grows past `limit` bytes (before it is all
    read)."""
    if json_only:
        check_content_type(request)
    length = request.headers.get("content-length", "")
    if length.isascii() and length.isdigit() and (len(length) > 18 or int(length) > limit):
        raise RequestError(413, f"the request body has {length[:20]} bytes; the limit is {limit}.")
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RequestError(413, f"the request body is over the limit of {limit} bytes.")
            chunks.append(chunk)
    except ClientDisconnect:
        logger.info("a client went away after sending %d bytes of its request body.", size)
        raise RequestError(400, "the request body ended early (the client disconnected).") from None
    return b"".join(chunks)


async def client_gone(request: Request) -> None:
    """Ends when the client disconnects (its body already read): the request is then dropped, not decoded."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


class Upload(NamedTuple):
    """A file sent in a multipart form: its name as the client gave it, and its bytes."""

    filename: str
    data: bytes


async def form_fields(body: bytes, request: Request, max_files: int = 0) -> dict[str, Any]:
    """A multipart form's fields (strings; a file an Upload), the query string's too: the body already read within
    its limit, so the parser never reads past it."""
    from starlette.formparsers import MultiPartException, MultiPartParser

    async def stream() -> AsyncIterator[bytes]:
        yield body

    try:
        form = await MultiPartParser(request.headers, stream(), max_files=max_files, max_fields=64).parse()
    except MultiPartException as exc:
        raise RequestError(400, f"the multipart form cannot be read: {exc.message}") from None
    fields: dict[str, Any] = {k: v[-1] for k, v in urllib.parse.parse_qs(request.url.query).items()}
    for name, value in form.multi_items():
        if isinstance(value, str):
            fields[name] = value
        else:
            fields[name] = Upload(value.filename or "", await value.read())
    return fields


def key_ok(request: Request, access: Access) -> bool:
    """Whether a header carried a key (guard.py lets the paths that check keys themselves through)."""
    return not access.keys.required or bool(request.scope.get("state", {}).get("api_key_ok"))


class NoKey(RequestError):
    """The server takes keys and the request carried none that is one (`sent`: whether the body named one); each
    API answers it in its own way (401, LibreTranslate's 400 or 403, DeepL's 403)."""

    def __init__(self, sent: bool) -> None:
        super().__init__(401, NEEDS_KEY)
        self.sent = sent


def authorize(request: Request, access: Access, body_key: object = None) -> Key | None:
    """The request's key (a header's, else `body_key`, as LibreTranslate's and DeepL's forms send it), its request
    counted against its requests a minute (OverLimit past them); None on a server without keys."""
    if not access.keys.required:
        return None
    state = request.scope.setdefault("state", {})
    key = state.get("key")
    if key is None and isinstance(body_key, str) and body_key:
        key = access.keys.find(body_key)
    if key is None:
        raise NoKey(sent=isinstance(body_key, str) and bool(body_key))
    if not state.get("admitted"):
        access.keys.usage.admit(key)
        state["admitted"] = True
    state["key"] = key
    return key


def charge(request: Request, access: Access, chars: int) -> None:
    """Count a request's characters against its key's characters a day (OverLimit past them: nothing decoded)."""
    key = request.scope.get("state", {}).get("key")
    if key is not None:
        access.keys.usage.charge(key, chars)


def owner(request: Request) -> str:
    """Whose a stored thing (a glossary) is: the request's key's name ("" on a server without keys)."""
    key = request.scope.get("state", {}).get("key")
    return key.name if key is not None else ""
