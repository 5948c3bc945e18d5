"""The HTTP endpoints of `mtkit serve` (FastAPI): /translate, OpenNMT-py's /translator/translate, /health, /info.

Bodies are read with a size cap and parsed by mtkit/serve/payload.py, so every refusal is a
JSON object `{"error": "one sentence."}` with its status; the work itself is the Service's.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from mtkit.decode.translator import Translation
from mtkit.serve.payload import RequestError, parse_json, parse_opennmt, parse_translate
from mtkit.serve.service import Service

logger = logging.getLogger(__name__)


def error_response(status: int, message: str, retry_after: int | None = None) -> JSONResponse:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refused with 413 as soon as it grows past `limit` bytes (before it is all read)."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise RequestError(413, f"the request body has {length} bytes; the limit is {limit}.")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestError(413, f"the request body is over the limit of {limit} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


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


def create_app(service: Service, on_load_failure: Callable[[], None] | None = None) -> FastAPI:
    """The FastAPI app; loading starts with the server, and shutdown drains the queue."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.start_loading(on_load_failure or (lambda: None))
        yield
        logger.info("shutting down: finishing %d queued request(s).", service.batcher.queued if service.batcher else 0)
        service.close()

    app = FastAPI(title="mtkit serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
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
        lines, config = parse_translate(parse_json(await read_body(request, limits.max_body_bytes)), default, limits)
        return translate_answer(await service.translate(lines, config), config.nbest, service.settings.name)

    @app.post("/translator/translate")
    async def translator_translate(request: Request) -> list[list[dict[str, Any]]]:
        sources = parse_opennmt(parse_json(await read_body(request, limits.max_body_bytes)), limits)
        return opennmt_answer(sources, await service.translate(sources, default), default.nbest)

    @app.get("/health")
    async def health() -> JSONResponse:
        if service.batcher is not None:
            return JSONResponse(
                {
                    "status": "ready",
                    "model": service.settings.name,
                    "queued": service.batcher.queued,
                    "decoded": dict(service.batcher.done),
                }
            )
        return JSONResponse({"status": "loading", "model": service.settings.name}, status_code=503)

    @app.get("/info")
    async def info() -> dict[str, Any]:
        if not service.ready:
            raise RequestError(503, "the model is still loading; retry shortly.", retry_after=1)
        return service.info

    return app
