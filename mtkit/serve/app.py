"""The HTTP endpoints of `mtkit serve` (FastAPI): /translate, OpenNMT-py's /translator/translate, /health, /info,
LibreTranslate's API (/translate with q, /languages, /detect: mtkit/serve/libretranslate.py) and the page at /.

Before a request reaches an endpoint, mtkit/serve/guard.py checks its Host, Origin and API key
(with CORS headers for the web pages allowed). mtkit's own bodies must say `Content-Type:
application/json` (a cross-site form or text/plain POST cannot; LibreTranslate's requests may be
forms, which browsers mark with an Origin), are read with a size cap and parsed by
mtkit/serve/payload.py, so every refusal is a JSON object `{"error": "one sentence."}` with its
status; the work itself is the Service's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect

from mtkit.config import DecodeConfig
from mtkit.decode.translator import Translation
from mtkit.serve import libretranslate as lt
from mtkit.serve.connections import loop_errors
from mtkit.serve.guard import NEEDS_KEY, Access, ApiKey, CatchAll, HostAndOrigin
from mtkit.serve.page import HEADERS as PAGE_HEADERS
from mtkit.serve.page import PAGE
from mtkit.serve.payload import RequestError, parse_json, parse_opennmt, parse_translate
from mtkit.serve.service import Service

logger = logging.getLogger(__name__)
LibreAnswer = Callable[[Request, dict[str, Any], bool], Awaitable[Any]]


def error_response(status: int, message: str, retry_after: int | None = None) -> JSONResponse:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


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
    limits = service.settings.limits  # a request's decoding defaults are service.defaults, the model's own applied

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

    def key_ok(request: Request) -> bool:
        """Whether a header carried the key (guard.py lets /translate and /detect through for a key in the body)."""
        return service.settings.access.api_key is None or bool(request.scope.get("state", {}).get("api_key_ok"))

    async def libre(request: Request, answer: LibreAnswer, fields: dict[str, Any] | None = None) -> Any:
        """A LibreTranslate request: its key checked, and its errors in LibreTranslate's codes (400 for what the
        client got wrong, where mtkit's own API says 413, 415 or 422; 403; 5xx as they are)."""
        try:
            is_json = fields is not None
            if fields is None:
                body = await read_body(request, limits.max_body_bytes, json_only=False)
                fields, is_json = lt.read_fields(body, request.headers.get("content-type", ""), request.url.query)
            lt.check_key(fields, service.settings.access.api_key, key_ok(request))
            return await answer(request, fields, is_json)
        except RequestError as exc:
            if 400 < exc.status < 500 and exc.status not in (403, 429, 499):
                raise RequestError(400, exc.message, exc.retry_after) from None
            raise

    async def libre_translate(request: Request, fields: dict[str, Any], is_json: bool) -> dict[str, Any]:
        if not service.ready:
            raise RequestError(503, "the model is still loading; retry shortly.", retry_after=1)
        req = lt.parse_request(fields, service.directions, limits, is_json)

        def run(lines: list[str], config: DecodeConfig, target_lang: str) -> Awaitable[list[Translation]]:
            return service.translate(lines, config, lambda: client_gone(request), target_lang)

        return await lt.translate(
            req, service.directions, service.detector, service.defaults, limits, run, service.align
        )

    async def libre_detect(request: Request, fields: dict[str, Any], is_json: bool) -> list[dict[str, Any]]:
        q = fields.get("q")
        if not isinstance(q, str) or not q:
            raise RequestError(400, "the request has no q parameter (the text whose language to detect).")
        if not service.ready:
            raise RequestError(503, "the model is still loading; retry shortly.", retry_after=1)
        return await asyncio.to_thread(service.detector.detect, q)

    @app.post("/translate")
    async def translate(request: Request) -> Any:
        """mtkit's own {"text": [...]}, or LibreTranslate's {"q": ...} (JSON with q, or a urlencoded form)."""
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media == "application/x-www-form-urlencoded":  # what libretranslatepy sends
            return await libre(request, libre_translate)
        if not key_ok(request) and media != "application/json":
            raise RequestError(401, NEEDS_KEY)
        data = parse_json(await read_body(request, limits.max_body_bytes))
        if isinstance(data, dict) and "text" not in data and {"q", "source", "target"} & set(data):
            return await libre(request, libre_translate, data)
        if not key_ok(request):
            raise RequestError(401, NEEDS_KEY)
        lines, config, target_lang = parse_translate(data, service.defaults, limits)
        translations = await service.translate(lines, config, lambda: client_gone(request), target_lang)
        return translate_answer(translations, config.nbest, service.settings.name)

    @app.post("/translator/translate")
    async def translator_translate(request: Request) -> list[list[dict[str, Any]]]:
        sources = parse_opennmt(parse_json(await read_body(request, limits.max_body_bytes)), limits)
        decode = service.defaults
        return opennmt_answer(
            sources, await service.translate(sources, decode, lambda: client_gone(request)), decode.nbest
        )

    @app.post("/detect")
    async def detect(request: Request) -> Any:
        """LibreTranslate's language detection, among the model's source languages."""
        return await libre(request, libre_detect)

    @app.get("/languages")
    async def languages() -> list[dict[str, Any]]:
        """LibreTranslate's list: each language with the codes it translates into."""
        if not service.ready:
            raise RequestError(503, "the model is still loading; retry shortly.", retry_after=1)
        return service.directions.languages()

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
