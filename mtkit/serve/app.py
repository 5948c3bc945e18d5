"""The FastAPI app of `mtkit serve`: the checks around every request, the server's own endpoints (/health, /info, the
page at /), and each API mounted by its adapter over the Service (mtkit/serve/service.py), which knows none of them:

    native.py          mtkit's own POST /translate {"text": [...]}
    opennmt.py         OpenNMT-py's POST /translator/translate
    libretranslate.py  LibreTranslate's /translate {"q": ...}, /languages, /detect, /frontend/settings, /suggest, /spec
    deepl.py           DeepL's API v2: /v2/translate, /v2/languages, /v2/usage, /v2/glossaries
    openai.py          an OpenAI-compatible POST /v1/chat/completions, GET /v1/models

Before a request reaches an endpoint, mtkit/serve/guard.py checks its Host, Origin and API key
(with CORS headers for the web pages allowed). mtkit's own bodies must say `Content-Type:
application/json` (a cross-site form or text/plain POST cannot; LibreTranslate's requests may be
forms, which browsers mark with an Origin), are read with a size cap (mtkit/serve/http.py) and
parsed by mtkit/serve/payload.py, so every refusal is a JSON object `{"error": "one sentence."}`
with its status; the work itself is the Service's. A new API is one new adapter module with a
`mount(app, service)`, added to `ADAPTERS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware

from mtkit.serve import deepl, libretranslate, native, openai, opennmt
from mtkit.serve.connections import loop_errors
from mtkit.serve.guard import Access, ApiKey, CatchAll, HostAndOrigin, refused_from_head
from mtkit.serve.heads import Screen
from mtkit.serve.http import error_response, media_type, read_body
from mtkit.serve.keys import OverLimit
from mtkit.serve.page import HEADERS as PAGE_HEADERS
from mtkit.serve.page import PAGE
from mtkit.serve.payload import RequestError, parse_json
from mtkit.serve.service import Service

logger = logging.getLogger(__name__)
ADAPTERS = (
    opennmt,
    libretranslate,
    deepl,
    openai,
)  # each mounts its own endpoints; /translate is shared (`create_app`)
LIBRE_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")  # libretranslatepy's; LibreTranslate's page


def over_limit(path: str, exc: OverLimit) -> Response:
    """A key past its requests a minute, refused from its header (guard.py's ApiKey) in the shape of the path's API:
    DeepL's `{"message"}`, OpenAI's `{"error": {...}}`, else mtkit's and LibreTranslate's `{"error"}`."""
    if path.startswith("/v2/"):
        return deepl.error(429, exc.message, exc.retry_after)
    if path.startswith("/v1/"):
        return openai.error(429, exc.message, "rate_limit_exceeded", retry_after=exc.retry_after)
    return error_response(429, exc.message, exc.retry_after)


def head_refusal(access: Access) -> Screen | None:
    """The answer the app would give, from a request's head alone, to a key past its requests this minute (the
    server's connections answer it before the app: mtkit/serve/heads.py), None for any other request; no
    screen at all for a server without keys, which has no limits to keep."""
    if not access.keys.required:
        return None

    def screen(path: str, headers: dict[bytes, bytes]) -> Response | None:
        exc = refused_from_head(access, path, headers)
        return None if exc is None else over_limit(path, exc)

    return screen


def guard(app: FastAPI, access: Access) -> None:
    """The checks around the endpoints, outermost last: errors, Host and Origin, CORS, the API key."""
    app.add_middleware(ApiKey, access=access, refuse=over_limit)
    if access.origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(access.origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", "Authorization", "X-API-Key"],
            max_age=600,
        )
    app.add_middleware(HostAndOrigin, access=access)
    app.add_middleware(CatchAll)


def create_app(service: Service, on_load_failure: Callable[[], None] | None = None) -> FastAPI:
    """The FastAPI app; loading starts with the server, and shutdown drains the queue (within the drain time)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        asyncio.get_running_loop().set_exception_handler(loop_errors)  # one line, not a traceback per event
        service.start_loading(on_load_failure or (lambda: None))
        yield
        logger.info("shutting down: finishing %d queued request(s).", service.batcher.queued if service.batcher else 0)
        await asyncio.to_thread(service.close)

    app = FastAPI(title="mtkit serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    guard(app, service.settings.access)

    @app.exception_handler(RequestError)
    async def request_error(request: Request, exc: RequestError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.retry_after)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        message = {
            404: f"there is no endpoint {request.url.path}; see GET /info and POST /translate.",
            405: f"{request.method} is not allowed on {request.url.path}.",
        }.get(exc.status_code, exc.detail)
        return error_response(exc.status_code, message)

    @app.post("/translate")
    async def translate(request: Request) -> Any:
        """The path two APIs share: LibreTranslate's {"q": ...} (JSON with q, a urlencoded or multipart form, or
        fields in the query string of a request without a body), else mtkit's own {"text": [...]}. A body that is
        not JSON (415) or not valid JSON (400) is refused before any key is asked for."""
        media = media_type(request)
        bodiless = request.headers.get("content-length", "0") == "0" and "transfer-encoding" not in request.headers
        if media in LIBRE_FORMS or (not media and bodiless and request.url.query):
            return await libretranslate.translate(request, service)
        data = parse_json(await read_body(request, service.settings.limits.max_body_bytes))
        if isinstance(data, dict) and "text" not in data and {"q", "source", "target"} & set(data):
            return await libretranslate.translate(request, service, data)
        return await native.translate(request, service, data)

    for adapter in ADAPTERS:
        adapter.mount(app, service)

    @app.get("/")
    async def page() -> HTMLResponse:
        """A page to try the model: mtkit/serve/page.py."""
        return HTMLResponse(PAGE, headers=PAGE_HEADERS)

    @app.get("/health")
    async def health() -> JSONResponse:
        status, body = service.health()
        return JSONResponse(body, status_code=status)

    @app.get("/info")
    async def info() -> dict[str, Any]:
        if not service.ready:
            raise RequestError(503, "the model is still loading; retry shortly.", retry_after=1)
        return service.info

    return app
