"""DeepL's glossary endpoints (v2) on `mtkit serve`, over mtkit/serve/glossaries.py: each key sees and changes only
the glossaries it made. They are the server's one set of glossary endpoints: mtkit's own API names a glossary made
here by its `glossary_id` too (any header that carries the key will do).

    POST   /v2/glossaries                 name, source_lang, target_lang, entries, entries_format (tsv, csv) -> 201
    GET    /v2/glossaries                 {"glossaries": [...]}
    GET    /v2/glossaries/{id}            the glossary's description
    GET    /v2/glossaries/{id}/entries    its entries as TSV
    DELETE /v2/glossaries/{id}            204
    GET    /v2/glossary-language-pairs    the model's directions
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from mtkit.serve.glossaries import MAX_BYTES, Stored, parse_entries
from mtkit.serve.http import owner
from mtkit.serve.payload import RequestError
from mtkit.serve.service import Service

Handler = Callable[[Request, dict[str, Any]], Awaitable[Any]]
Answer = Callable[[Request, Service, Handler], Awaitable[Any]]


def described(glossary: Stored) -> dict[str, Any]:
    """A glossary as DeepL describes one (GlossaryInfo)."""
    return {
        "glossary_id": glossary.glossary_id,
        "name": glossary.name,
        "ready": True,
        "source_lang": glossary.source,
        "target_lang": glossary.target,
        "creation_time": glossary.created.isoformat(timespec="microseconds"),
        "entry_count": len(glossary.entries),
    }


def mount(app: FastAPI, service: Service, answer: Answer) -> None:
    """The glossary endpoints on `app`; `answer` reads, checks the key and shapes errors as DeepL's other endpoints."""
    glossaries = service.glossaries

    def found(request: Request, glossary_id: str) -> Stored:
        glossary = glossaries.get(owner(request), glossary_id)
        if glossary is None:
            raise RequestError(404, "Glossary not found.")
        return glossary

    @app.post("/v2/glossaries")
    async def create(request: Request) -> Any:
        async def made(request: Request, fields: dict[str, Any]) -> Any:
            dirs = service.directions
            source = dirs.spelled(str(fields.get("source_lang") or "").split("-")[0].lower())
            target = dirs.spelled(str(fields.get("target_lang") or "").split("-")[0].lower())
            if target not in dirs.targets(source):
                raise RequestError(
                    400, f"Unsupported glossary language pair: {source}-{target} is not translated here."
                )
            entries = fields.get("entries")
            if not isinstance(entries, str):
                raise RequestError(400, "Parameter 'entries' not specified.")
            name = fields.get("name")
            glossary = glossaries.create(
                owner(request),
                name if isinstance(name, str) else "",
                source,
                target,
                parse_entries(entries, str(fields.get("entries_format", "tsv"))),
            )
            return JSONResponse(described(glossary), status_code=201)

        return await answer(request, service, made, limit=3 * MAX_BYTES + 2**16)  # a form's %XX escapes: 3 bytes each

    @app.get("/v2/glossaries")
    async def listed(request: Request) -> Any:
        async def mine(request: Request, fields: dict[str, Any]) -> Any:
            return {"glossaries": [described(g) for g in glossaries.owned(owner(request))]}

        return await answer(request, service, mine)

    @app.get("/v2/glossaries/{glossary_id}")
    async def one(request: Request, glossary_id: str) -> Any:
        async def it(request: Request, fields: dict[str, Any]) -> Any:
            return described(found(request, glossary_id))

        return await answer(request, service, it)

    @app.get("/v2/glossaries/{glossary_id}/entries")
    async def entries(request: Request, glossary_id: str) -> Any:
        async def tsv(request: Request, fields: dict[str, Any]) -> Any:
            text = "\n".join(f"{s}\t{t}" for s, t in found(request, glossary_id).entries.items())
            return Response(text, media_type="text/tab-separated-values; charset=utf-8")

        return await answer(request, service, tsv)

    @app.delete("/v2/glossaries/{glossary_id}")
    async def delete(request: Request, glossary_id: str) -> Any:
        async def gone(request: Request, fields: dict[str, Any]) -> Any:
            if not glossaries.delete(owner(request), glossary_id):
                raise RequestError(404, "Glossary not found.")
            return Response(status_code=204)

        return await answer(request, service, gone)

    @app.get("/v2/glossary-language-pairs")
    async def pairs(request: Request) -> Any:
        async def listed_pairs(request: Request, fields: dict[str, Any]) -> Any:
            return {"supported_languages": [{"source_lang": s, "target_lang": t} for s, t in service.directions.pairs]}

        return await answer(request, service, listed_pairs)
