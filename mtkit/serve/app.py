"""The HTTP endpoints of `mtkit serve` (FastAPI): /translate, OpenNMT-py's /translator/translate, /health, /info.

Before a request reaches an endpoint, mtkit/serve/guard.py checks its Host, Origin and API key
(with CORS headers for the web pages allowed). Bodies must say `Content-Type: application/json`
(a cross-site form or text/plain POST cannot), are read with a size cap and parsed by
mtkit/serve/payload.py, so every refusal is a JSON object `{"error": "one sentence."}` with its
status; the work itself is the Service's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect

from mtkit.decode.translator import Translation
from mtkit.serve.connections import loop_errors
from mtkit.serve.guard import Access, ApiKey, CatchAll, HostAndOrigin
from mtkit.serve.payload import RequestError, parse_json, parse_opennmt, parse_translate
from mtkit.serve.service import Service

logger = logging.getLogger(__name__)


def error_response(status: int, message: str, retry_after: int | None = None) -> JSONResponse:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def check_content_type(request: Request) -> None:
    """JSON only (415 otherwise): a web page can send a form or text/plain cross-site without asking first."""
    media, *params = request.headers.get("content-type", "").split(";")
    given = [p.split("=", 1)[1].strip().strip('"').lower() for p in params if p.strip().lower().startswith("charset=")]
    charset = given[0] if given else "utf-8"
    if media.strip().lower() != "application/json" or charset not in ("utf-8", "utf8"):
        shown = media.strip()[:60] or "none"
        raise RequestError(415, f"the request body must be Content-Type: application/json (UTF-8), not {shown}.")


async def read_body(request: Request, limit: int) -> bytes:
    """The whole JSON body, refused with 413 as soon as it grows past `limit` bytes (before it is all read)."""
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


def translate_answer(translations: list[Translation], nbest: int, model: str) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "translations": [t.text for t in translations],
        "scores": [t.score for t in translations],
        "model": model,
    }
    if nbest > 1:
        answer["nbest"] = [[{"text": text, "score": score} for text, score in t.hypotheses] for t in translations]
    return answer


def opennmt_answer(sources: list[str], translations: list[Translation], nbest: int) -> list[list[dict[str, Any]]]:
    """OpenNMT-py's shape: one list for the request, one entry per source and hypothesis."""
    return [
        [
            {"src": src, "tgt": text, "n_best": nbest, "pred_score": score}
            for src, t in zip(sources, translations)
            for text, score in t.hypotheses
        ]
    ]


def guard(app: FastAPI, access: Access) -> None:
    """The checks around the endpoints, outermost last: errors, Host and Origin, CORS, the API key."""
    app.add_middleware(ApiKey, access=access)
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
    limits, default = service.settings.limits, service.settings.decode

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
    async def translate(request: Request) -> dict[str, Any]:
        body = parse_json(await read_body(request, limits.max_body_bytes))
        lines, config, target_lang = parse_translate(body, default, limits)
        translations = await service.translate(lines, config, lambda: client_gone(request), target_lang)
        return translate_answer(translations, config.nbest, service.settings.name)

    @app.post("/translator/translate")
    async def translator_translate(request: Request) -> list[list[dict[str, Any]]]:
        sources = parse_opennmt(parse_json(await read_body(request, limits.max_body_bytes)), limits)
        return opennmt_answer(
            sources, await service.translate(sources, default, lambda: client_gone(request)), default.nbest
        )

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
