"""DeepL's API v2 on `mtkit serve`: what the official `deepl` client libraries, browser extensions and DeepLX users
send, pointed at this server's URL (`deepl.Translator(KEY, server_url=URL)`).

    POST /v2/translate            text (a list), target_lang, source_lang (else detected), tag_handling html/xml
                                  (the markup path), split_sentences, preserve_formatting, formality, context,
                                  glossary_id, ... as JSON or a form
    GET|POST /v2/languages        ?type=source|target
    GET|POST /v2/usage            the key's characters today and its characters a day
    POST /v2/document             a file (mtkit/documents/'s formats) translated in the background; its status
                                  at /v2/document/{id}, its translation at /v2/document/{id}/result (once)
    /v2/glossaries, /v2/glossary-language-pairs   mtkit/serve/deepl_glossaries.py

DeepL's codes are mapped: EN-GB, EN-US are the model's en, PT-BR its pt, any case; the answer's
`detected_source_language` is the code in capitals. The key comes as `Authorization: DeepL-Auth-Key
KEY` (or a form's `auth_key`) and is one of the server's keys, with their limits. Errors are DeepL's
shapes and codes: `{"message": "..."}` with 400, 403 (no key, a wrong key), 404, 413 (too large),
429 (busy, or the key's requests a minute), 456 (the key's characters a day), 503 (loading).

A `glossary_id` (the key's own: another key's is 404, as DeepL answers) has its terms enforced in decoding
(mtkit/decode/glossary.py), in /v2/translate and /v2/document alike; as DeepL, it needs `source_lang`, and its
language pair must be the request's (400). What the model cannot do is said, never ignored: `ignore_tags`, a
formality other than the default, a glossary on a model served by CTranslate2 (which cannot enforce one) and
an `output_format` other than the file's own are refused (400); `context`,
`split_sentences`, `preserve_formatting`, `outline_detection`, `model_type` and the splitting-tag
lists are accepted and change nothing.
"""

from __future__ import annotations

import dataclasses
import hmac
import mimetypes
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from mtkit.decode.glossary import Glossary
from mtkit.langid import base_language
from mtkit.serve.documents import characters, check_size, file_format, read_plan, safe_name, translate_plan
from mtkit.serve.files import Kept
from mtkit.serve.http import NoKey, Upload, authorize, charge, client_gone, form_fields, media_type, owner, read_body
from mtkit.serve.keys import OverLimit
from mtkit.serve.languages import NAMES, translatable
from mtkit.serve.markup import translate_html
from mtkit.serve.payload import Busy, RequestError, check_lines, cut, parse_json
from mtkit.serve.service import Service

VARIANTS = {"en": ("EN-GB", "EN-US"), "pt": ("PT-BR", "PT-PT")}  # targets DeepL lists only with their region
UNLIMITED = 1_000_000_000_000  # /v2/usage's character_limit for a key without one
SPLIT_SENTENCES = ("0", "1", "nonewlines")
FORMALITIES = ("default", "prefer_more", "prefer_less")


def error(status: int, message: str, retry_after: int | None = None) -> JSONResponse:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse({"message": message}, status_code=status, headers=headers)


Handler = Callable[[Request, dict[str, Any]], Awaitable[Any]]


async def fields_of(request: Request, service: Service, files: int = 0, limit: int | None = None) -> dict[str, Any]:
    """A request's fields: a JSON object, or a form (repeated `text` fields a list; multipart with up to `files`
    files, each an Upload), the query string's too; its body within `limit` bytes (None: the request limits')."""
    query = urllib.parse.parse_qs(request.url.query)
    fields: dict[str, Any] = {k: v if k == "text" else v[-1] for k, v in query.items()}
    limits = service.settings.limits
    if limit is None:
        limit = limits.max_file_bytes + 2**16 if files else limits.max_body_bytes
    body = await read_body(request, limit, json_only=False)
    if not body.strip():
        return fields
    if media_type(request) == "multipart/form-data":
        return {**fields, **await form_fields(body, request, files)}
    if media_type(request) == "application/json":
        data = parse_json(body)
        if not isinstance(data, dict):
            raise RequestError(400, "the request must be a JSON object.")
        return {**fields, **data}
    try:
        form = urllib.parse.parse_qs(body.decode("utf-8"), keep_blank_values=True)
    except UnicodeDecodeError as exc:
        raise RequestError(400, f"the request body is not valid UTF-8 (byte {exc.start}).") from None
    return {**fields, **{k: v if k == "text" else v[-1] for k, v in form.items()}}


async def answer(request: Request, service: Service, handler: Handler, files: int = 0, limit: int | None = None) -> Any:
    """Read the fields (within `limit` bytes: `fields_of`), check the key, run `handler`; every refusal in DeepL's
    shape and codes."""
    try:
        fields = await fields_of(request, service, files, limit)
        try:
            authorize(request, service.settings.access, fields.get("auth_key"))
        except NoKey:
            return error(403, "Authorization failure: send a valid key as 'Authorization: DeepL-Auth-Key KEY'.")
        return await handler(request, fields)
    except OverLimit as exc:
        return error(456 if exc.quota else 429, exc.message, exc.retry_after)
    except Busy as exc:
        return error(429, exc.message, exc.retry_after)
    except RequestError as exc:
        status = exc.status if exc.status in (400, 403, 404, 413, 429, 499, 500, 503, 504) else 400
        return error(status, exc.message, exc.retry_after)


def base(code: Any, what: str) -> str:
    """A DeepL language code's base language, lowercased: EN-GB and en-us are en."""
    if not isinstance(code, str) or not code:
        raise RequestError(400, f"Value for '{what}' not supported.")
    return base_language(code)


def flag(value: Any, name: str) -> bool:
    """DeepL's booleans: true/false, or "0"/"1" in a form."""
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("0", "1", "true", "false"):
        return str(value).lower() in ("1", "true")
    raise RequestError(400, f"Value for '{name}' not supported.")


def check_options(fields: dict[str, Any]) -> None:
    """The options accepted although they change nothing here, and the ones refused because the model cannot."""
    if "split_sentences" in fields and str(fields["split_sentences"]) not in SPLIT_SENTENCES:
        raise RequestError(400, "Value for 'split_sentences' not supported.")
    for name in ("preserve_formatting", "outline_detection"):
        if name in fields:
            flag(fields[name], name)
    if fields.get("formality", "default") not in FORMALITIES:
        raise RequestError(400, "'formality' is not supported for the given 'target_lang' on this server.")
    if fields.get("ignore_tags"):
        raise RequestError(400, "ignore_tags is not supported on this server; mark such text translate=\"no\".")
    if fields.get("tag_handling") not in (None, "", "html", "xml"):
        raise RequestError(400, "Value for 'tag_handling' not supported; use html or xml.")


async def translate(request: Request, service: Service, fields: dict[str, Any]) -> dict[str, Any]:
    """POST /v2/translate."""
    if not service.ready:
        raise RequestError(503, "the model is still loading; retry shortly.", retry_after=1)
    dirs = service.directions
    texts = fields.get("text")
    if texts is None or texts == []:
        raise RequestError(400, "Parameter 'text' not specified.")
    lines = check_lines(texts if isinstance(texts, list) else [texts], "text", service.settings.limits)
    target = dirs.spelled(base(fields.get("target_lang"), "target_lang"))
    if target not in dirs.all_targets:
        raise RequestError(400, f"Value for 'target_lang' not supported: this server translates into "
                           f"{', '.join(c.upper() for c in dirs.all_targets) or 'nothing it knows of'}.")  # fmt: skip
    check_options(fields)
    glossary = glossary_of(request, service, fields, target)
    if fields.get("source_lang"):
        source = dirs.spelled(base(fields["source_lang"], "source_lang"))
        if target not in dirs.targets(source):
            raise RequestError(400, "Value for 'source_lang' not supported for this 'target_lang'.")
        sources = [source] * len(lines)
    else:
        sources = await detect_sources(service, lines, target)
    charge(request, service.settings.access, sum(map(len, lines)))
    config = dataclasses.replace(service.defaults, nbest=1)
    target_lang, gone = dirs.target_lang(target), lambda: client_gone(request)
    found, todo = list(lines), [k for k, line in enumerate(lines) if translatable(line)]  # emoji only: as it is
    done: list[str] = []
    if todo and fields.get("tag_handling") in ("html", "xml"):
        done = await translate_html(service, [lines[k] for k in todo], config, target_lang, gone, glossary)
    elif todo:
        todo_lines = [lines[k] for k in todo]
        done = [t.text for t in await service.translate(todo_lines, config, gone, target_lang, glossary=glossary)]
    for k, text in zip(todo, done):
        found[k] = text
    return {
        "translations": [
            {"detected_source_language": s.upper(), "text": text, "billed_characters": len(line)}
            for s, text, line in zip(sources, found, lines)
        ]
    }


def glossary_of(request: Request, service: Service, fields: dict[str, Any], target: str) -> Glossary | None:
    """The terms of the request's `glossary_id` (None without one): the key's own glossary (404 otherwise), for the
    request's source language, which it must name, and target language (400 otherwise)."""
    if not fields.get("glossary_id"):
        return None
    glossary = service.glossaries.get(owner(request), str(fields["glossary_id"]))
    if glossary is None:
        raise RequestError(404, "Glossary not found.")
    if not fields.get("source_lang"):
        raise RequestError(400, "Parameter 'source_lang' is required when using a glossary.")
    source = service.directions.spelled(base(fields["source_lang"], "source_lang"))
    if (glossary.source, glossary.target) != (source, target):
        raise RequestError(
            400,
            f"The glossary is {glossary.source}-{glossary.target}; this request translates {cut(source)}-{target}: "
            "use a glossary of its language pair.",
        )
    return glossary.terms


async def detect_sources(service: Service, lines: list[str], target: str) -> list[str]:
    """Each text's source language when the request names none: the model's one source language, or the most likely
    of its sources that translate into `target` (DeepL translates what it detects; it does not refuse)."""
    candidates = [s for s in service.directions.sources if target in service.directions.targets(s)]
    if len(candidates) <= 1:
        return [candidates[0] if candidates else ""] * len(lines)
    ranked = await service.detect(lines)
    return [next((r["language"] for r in found if r["language"] in candidates), candidates[0]) for found in ranked]


async def document_upload(request: Request, service: Service, fields: dict[str, Any]) -> dict[str, Any]:
    """POST /v2/document: the file read and its characters counted now (a damaged file is 400, a key past its
    characters 456, before anything is decoded); translated in the background, its status asked by its id."""
    if not service.ready:
        raise RequestError(503, "the model is still loading; retry shortly.", retry_after=1)
    upload = fields.get("file")
    if not isinstance(upload, Upload):
        raise RequestError(400, "Parameter 'file' not specified.")
    check_size(upload.data, service.settings.limits.max_file_bytes)
    dirs = service.directions
    target = dirs.spelled(base(fields.get("target_lang"), "target_lang"))
    sources = [dirs.spelled(base(fields["source_lang"], "source_lang"))] if fields.get("source_lang") else dirs.sources
    if not any(target in dirs.targets(source) for source in sources):
        raise RequestError(400, "Value for 'target_lang' not supported.")
    check_options(fields)
    name = safe_name(str(fields.get("filename") or upload.filename))
    output = fields.get("output_format")
    if output and str(output).lower().lstrip(".") != name.rsplit(".", 1)[-1].lower():
        raise RequestError(400, "output_format is not supported: a file comes back in its own format.")
    glossary = glossary_of(request, service, fields, target)
    plan = await read_plan(upload.data, file_format(name))
    charge(request, service.settings.access, characters(plan))
    ident, kept = service.files.add(owner(request), name)
    kept.characters = characters(plan)
    target_lang = dirs.target_lang(target)
    service.files.run(kept, lambda counted: translate_plan(service, plan, target_lang, glossary=glossary))
    return {"document_id": ident, "document_key": kept.key}


def document_of(request: Request, service: Service, document_id: str, fields: dict[str, Any]) -> Kept:
    """The document by its id and key, this request's key's own; 404 otherwise."""
    kept = service.files.get(owner(request), document_id)
    given = str(fields.get("document_key", ""))
    if kept is None or not hmac.compare_digest(given.encode("utf-8", "replace"), kept.key.encode()):
        raise RequestError(404, "Document not found.")
    return kept


def languages(service: Service, kind: str) -> list[dict[str, Any]]:
    """GET /v2/languages: the sources, or the targets (en and pt as DeepL lists them, with their regions)."""
    dirs = service.directions
    if kind == "source":
        return [{"language": c.upper(), "name": NAMES.get(c.lower(), c)} for c in dirs.sources]
    listed = []
    for c in dirs.all_targets:
        for code in VARIANTS.get(c.lower(), (c.upper(),)):
            name = NAMES.get(c.lower(), c) + (f" ({code.split('-')[1]})" if "-" in code else "")
            listed.append({"language": code, "name": name, "supports_formality": False})
    return listed


def usage(request: Request, service: Service) -> dict[str, Any]:
    """GET /v2/usage: the key's characters today, and its limit a day (a very large one when it has none)."""
    key = request.scope.get("state", {}).get("key")
    if key is None:
        return {"character_count": 0, "character_limit": UNLIMITED}
    used = service.settings.access.keys.usage.used_today(key)
    return {"character_count": used, "character_limit": key.characters_per_day or UNLIMITED}


def mount(app: FastAPI, service: Service) -> None:
    """DeepL's endpoints on `app` (the glossaries': mtkit/serve/deepl_glossaries.py)."""
    from mtkit.serve import deepl_glossaries

    @app.post("/v2/translate")
    async def v2_translate(request: Request) -> Any:
        return await answer(request, service, lambda r, f: translate(r, service, f))

    @app.api_route("/v2/languages", methods=["GET", "POST"])
    async def v2_languages(request: Request) -> Any:
        async def listed(request: Request, fields: dict[str, Any]) -> Any:
            if not service.ready:
                raise RequestError(503, "the model is still loading; retry shortly.", retry_after=1)
            kind = str(fields.get("type", "source")).lower()
            if kind not in ("source", "target"):
                raise RequestError(400, f"Value for 'type' not supported: {cut(kind)} (source or target).")
            return languages(service, kind)

        return await answer(request, service, listed)

    @app.api_route("/v2/usage", methods=["GET", "POST"])
    async def v2_usage(request: Request) -> Any:
        async def used(request: Request, fields: dict[str, Any]) -> Any:
            return usage(request, service)

        return await answer(request, service, used)

    @app.post("/v2/document")
    async def v2_document(request: Request) -> Any:
        return await answer(request, service, lambda r, f: document_upload(r, service, f), files=1)

    @app.post("/v2/document/{document_id}")
    async def v2_document_status(request: Request, document_id: str) -> Any:
        async def status(request: Request, fields: dict[str, Any]) -> Any:
            kept = document_of(request, service, document_id, fields)
            answer: dict[str, Any] = {"document_id": document_id, "status": kept.status}
            answer["billed_characters"] = kept.characters
            if kept.status == "error":
                answer["error_message"] = kept.error
            return answer

        return await answer(request, service, status)

    @app.post("/v2/document/{document_id}/result")
    async def v2_document_result(request: Request, document_id: str) -> Any:
        async def result(request: Request, fields: dict[str, Any]) -> Any:
            kept = document_of(request, service, document_id, fields)
            if kept.status == "error":
                raise RequestError(400, kept.error)
            if kept.status != "done":
                raise RequestError(503, "Document not ready.", retry_after=1)
            service.files.remove(document_id)  # downloaded once, as DeepL's
            media = mimetypes.guess_type(kept.name)[0] or "application/octet-stream"
            disposition = f'attachment; filename="{kept.name}"'
            return Response(kept.result, media_type=media, headers={"Content-Disposition": disposition})

        return await answer(request, service, result)

    deepl_glossaries.mount(app, service, answer)
