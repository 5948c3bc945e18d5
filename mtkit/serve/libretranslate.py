"""LibreTranslate's API on `mtkit serve`: what Mastodon, libretranslatepy and other LibreTranslate clients send.

`POST /translate` (`q` a string or a list, `source` a code or `auto`, `target`, `format` text or html,
`alternatives`, `api_key`; and mtkit's extension `confidence`, true for each translation's estimated probability of
being acceptable in a `confidence` field, a number or a list as `translatedText` is, which LibreTranslate has not:
its clients never ask, so they see nothing new), `GET /languages` and `POST /detect`, as JSON or as a urlencoded
form (libretranslatepy sends forms), answered in LibreTranslate's shapes: `{"translatedText": ...}`, `[{"code",
"name", "targets"}]`, `[{"confidence", "language"}]`, and `{"error": "..."}` with LibreTranslate's status codes
(400 for a bad request, a missing key or a limit passed; 403 for a wrong key; 500 when decoding failed; mtkit's 503
with Retry-After when busy or loading). A request goes through the same Host/Origin checks, limits, queue and
batcher as mtkit's own /translate. The key may come in the body (`api_key`), as LibreTranslate's clients send it,
or in a header as for mtkit's API.

A form post is accepted here, unlike on mtkit's own endpoints: a web page can send one cross-site
without asking first, but browsers mark it with an `Origin` header, which guard.py refuses unless
allowed with --allow-origin.
"""

from __future__ import annotations

import dataclasses
import mimetypes
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from mtkit.serve.documents import SERVED, characters, check_size, file_format, read_plan, safe_name, translate_plan
from mtkit.serve.guard import Access
from mtkit.serve.http import NoKey, Upload, authorize, charge, client_gone, form_fields, media_type, owner, read_body
from mtkit.serve.languages import (
    NAMES,
    NO_LANGUAGES,
    Detector,
    Directions,
    directions,
    for_target,
    parse_languages,
    translatable,
)
from mtkit.serve.libretranslate_spec import SPEC
from mtkit.serve.markup import translate_html
from mtkit.serve.payload import Busy, Limits, RequestError, check_lines, cut, parse_json
from mtkit.serve.service import Service

# The model's languages are every API's (mtkit/serve/languages.py); LibreTranslate's adapter names them too.
__all__ = ["Detector", "Directions", "directions", "for_target", "mount", "parse_languages", "parse_request"]

FIELDS = ("q", "source", "target", "format", "alternatives", "api_key", "confidence")


def read_fields(body: bytes, content_type: str, query: str) -> tuple[dict[str, Any], bool]:
    """The request's fields (JSON object or urlencoded form, the query string's too), and whether it is JSON."""
    media = content_type.split(";")[0].strip().lower()
    fields: dict[str, Any] = {k: v[-1] for k, v in urllib.parse.parse_qs(query).items()}
    if media == "application/json":
        data = parse_json(body) if body.strip() else {}
        if not isinstance(data, dict):
            raise RequestError(400, 'the request must be a JSON object like {"q": "A sentence.", "target": "de"}.')
        return {**fields, **data}, True
    if media in ("application/x-www-form-urlencoded", ""):
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RequestError(400, f"the request body is not valid UTF-8 (byte {exc.start}).") from None
        form = {k: v[-1] for k, v in urllib.parse.parse_qs(text, keep_blank_values=True).items()}
        return {**fields, **form}, False
    raise RequestError(400, f"send JSON or a urlencoded form, not {cut(media)}.")


async def request_fields(request: Request, service: Service, files: int = 0) -> tuple[dict[str, Any], bool]:
    """The fields of a LibreTranslate request however they came (JSON, a urlencoded or multipart form, the query
    string), read within the body limit (a file's, with `files`), and whether they were JSON."""
    limits = service.settings.limits
    body = await read_body(request, limits.max_file_bytes + 2**16 if files else limits.max_body_bytes, json_only=False)
    if media_type(request) == "multipart/form-data":
        return await form_fields(body, request, files), False
    return read_fields(body, request.headers.get("content-type", ""), request.url.query)


def check_key(request: Request, fields: dict[str, Any], access: Access) -> None:
    """LibreTranslate's answers: no key 400, a wrong key 403 (a header key, mtkit's way, counts too); a key past
    its requests a minute 429."""
    try:
        authorize(request, access, fields.get("api_key"))
    except NoKey as exc:
        if exc.sent:
            raise RequestError(403, "the API key is not valid.") from None
        raise RequestError(400, "this server needs an API key: send it as api_key.") from None


def text_field(fields: dict[str, Any], name: str, default: str | None = None) -> str:
    value = fields.get(name, default)
    if value is None or value == "":
        raise RequestError(400, f"the request has no {name} parameter.")
    if not isinstance(value, str):
        raise RequestError(400, f"{name} must be a string.")
    return value


@dataclass(frozen=True)
class LibreRequest:
    lines: list[str]
    batch: bool
    source: str
    target: str
    html: bool
    alternatives: int
    confidence: bool = False


def parse_request(fields: dict[str, Any], dirs: Directions, limits: Limits, is_json: bool) -> LibreRequest:
    """The checked fields of a /translate request, in LibreTranslate's order of checks."""
    if "q" not in fields or fields["q"] in ("", None, []):
        raise RequestError(400, "the request has no q parameter (the text to translate).")
    q = fields["q"]
    batch = isinstance(q, list)
    lines = check_lines(q if batch else [q], "q", limits)
    if not is_json:
        lines = ["\n".join(line.splitlines()) for line in lines]
    source, target = text_field(fields, "source", "auto"), text_field(fields, "target")
    source, target = dirs.spelled(source) if source.lower() != "auto" else "auto", dirs.spelled(target)
    fmt = fields.get("format") or "text"
    if fmt not in ("text", "html"):
        raise RequestError(400, f"{cut(str(fmt))} format is not supported; use text or html.")
    try:
        alternatives = int(fields.get("alternatives") or 0)
    except (TypeError, ValueError, OverflowError):  # OverflowError: Infinity, 1e400 (JSON reads both as inf)
        raise RequestError(400, "alternatives must be a number.") from None
    confidence = fields.get("confidence", False)
    if not isinstance(confidence, bool):  # a form's: true or false, 1 or 0
        if str(confidence).lower() not in ("true", "false", "1", "0"):
            raise RequestError(400, "confidence must be true or false.")
        confidence = str(confidence).lower() in ("true", "1")
    if confidence and fmt == "html":
        raise RequestError(400, "confidence rates translations of text: ask for it with format text.")
    if not dirs.pairs:
        raise RequestError(400, NO_LANGUAGES)
    if source != "auto" and source not in dirs.sources:
        raise RequestError(400, f"{cut(source)} is not supported as a source; this server translates from "
                           f"{', '.join(dirs.sources)}.")  # fmt: skip
    if target not in {t for _, t in dirs.pairs}:
        known = ", ".join(dict.fromkeys(t for _, t in dirs.pairs))
        raise RequestError(400, f"{cut(target)} is not supported as a target; this server translates into {known}.")
    return LibreRequest(lines, batch, source, target, fmt == "html", max(0, alternatives), confidence)


async def translate_answer(req: LibreRequest, service: Service, request: Request) -> dict[str, Any]:
    """POST /translate's answer: translatedText (and detectedLanguage, alternatives) as LibreTranslate gives them."""
    dirs, default, limits = service.directions, service.defaults, service.settings.limits
    todo = [k for k, line in enumerate(req.lines) if translatable(line)]
    detected: list[dict[str, Any]] | None = None
    if req.source == "auto":  # a line with nothing to translate is "en" with confidence 0, as LibreTranslate says
        found = dict(zip(todo, await service.detect([req.lines[k] for k in todo])))
        detected = [found[k][0] if k in found else {"confidence": 0.0, "language": "en"} for k in range(len(req.lines))]
    for k in todo:
        language = detected[k]["language"] if detected is not None else req.source
        if req.target not in dirs.targets(language):
            raise RequestError(400, f"{language} to {req.target} is not a direction this server translates.")
    nbest = req.alternatives + 1
    if nbest > max(limits.max_beam, default.beam):
        raise RequestError(
            400, f"alternatives must be at most {max(limits.max_beam, default.beam) - 1} on this server."
        )
    charge(request, service.settings.access, sum(len(req.lines[k]) for k in todo))
    config = dataclasses.replace(default, nbest=nbest, beam=max(default.beam, nbest))
    target_lang = dirs.target_lang(req.target)
    gone = lambda: client_gone(request)  # noqa: E731
    texts, alternatives = list(req.lines), [list[str]() for _ in req.lines]
    rated = [1.0] * len(req.lines)  # a text given back as it is (nothing to translate) is certainly right
    lines = [req.lines[k] for k in todo]
    if req.html and lines:
        for k, text in zip(todo, await translate_html(service, lines, config, target_lang, gone)):
            texts[k] = text
    elif lines:
        for k, t in zip(todo, await service.translate(lines, config, gone, target_lang, confidence=req.confidence)):
            texts[k], alternatives[k] = t.text, [text for text, _ in t.hypotheses[1:]]
            rated[k] = 1.0 if t.confidence is None else t.confidence
    answer: dict[str, Any] = {"translatedText": texts if req.batch else texts[0]}
    if detected is not None:
        answer["detectedLanguage"] = detected if req.batch else detected[0]
    if req.alternatives > 0:
        answer["alternatives"] = alternatives if req.batch else alternatives[0]
    if req.confidence:
        answer["confidence"] = rated if req.batch else rated[0]
    return answer


Answer = Callable[[Request, dict[str, Any], bool], Awaitable[Any]]


async def answer(
    request: Request, service: Service, respond: Answer, fields: dict[str, Any] | None = None, files: int = 0
) -> Any:
    """A LibreTranslate request: its key checked, and its errors in LibreTranslate's codes (400 for what the client
    got wrong, where mtkit's own API says 413, 415 or 422; 403; 429 for a busy server or a key past its limit,
    with Retry-After; 5xx as they are)."""
    try:
        is_json = fields is not None
        if fields is None:
            fields, is_json = await request_fields(request, service, files)
        check_key(request, fields, service.settings.access)
        return await respond(request, fields, is_json)
    except Busy as exc:  # LibreTranslate's clients wait and retry on 429
        raise RequestError(429, exc.message, exc.retry_after) from None
    except RequestError as exc:
        if 400 < exc.status < 500 and exc.status not in (403, 429, 499):
            raise RequestError(400, exc.message, exc.retry_after) from None
        raise


def loaded(service: Service) -> None:
    if not service.ready:
        raise RequestError(503, "the model is still loading; retry shortly.", retry_after=1)


async def translate(request: Request, service: Service, fields: dict[str, Any] | None = None) -> Any:
    """POST /translate in LibreTranslate's shape: `fields` already read (a JSON body with q), or read here (a form)."""

    async def respond(request: Request, fields: dict[str, Any], is_json: bool) -> dict[str, Any]:
        loaded(service)
        req = parse_request(fields, service.directions, service.settings.limits, is_json)
        return await translate_answer(req, service, request)

    return await answer(request, service, respond, fields)


def mount(app: FastAPI, service: Service) -> None:
    """LibreTranslate's own endpoints on `app` (its /translate shares the path with mtkit's: app.py)."""

    async def respond_detect(request: Request, fields: dict[str, Any], is_json: bool) -> list[dict[str, Any]]:
        q = fields.get("q")
        if not isinstance(q, str) or not q:
            raise RequestError(400, "the request has no q parameter (the text whose language to detect).")
        loaded(service)
        return (await service.detect([q]))[0]

    @app.post("/detect")
    async def detect(request: Request) -> Any:
        """LibreTranslate's language detection, among the model's source languages."""
        return await answer(request, service, respond_detect)

    @app.get("/languages")
    async def languages() -> list[dict[str, Any]]:
        """LibreTranslate's list: each language with the codes it translates into."""
        loaded(service)
        return service.directions.languages()

    @app.get("/frontend/settings")
    async def frontend_settings() -> dict[str, Any]:
        """What LibreTranslate's web page asks first: limits, whether a key is needed, the languages it starts on."""
        loaded(service)
        return frontend(service)

    @app.post("/suggest")
    async def suggest(request: Request) -> Any:
        """LibreTranslate's suggestions, off as on a default LibreTranslate server: 403, and its page hides them."""

        async def respond(request: Request, fields: dict[str, Any], is_json: bool) -> Any:
            raise RequestError(403, "Suggestions are disabled on this server.")

        return await answer(request, service, respond)

    @app.post("/translate_file")
    async def translate_file(request: Request) -> Any:
        """A file (multipart: file, source, target, api_key) translated with its structure kept (mtkit/documents/)
        -> {"translatedFileUrl": its download link, kept 30 minutes}."""

        async def respond(request: Request, fields: dict[str, Any], is_json: bool) -> dict[str, Any]:
            loaded(service)
            upload = fields.get("file")
            if not isinstance(upload, Upload):
                raise RequestError(400, "the request has no file parameter (the file to translate).")
            check_size(upload.data, service.settings.limits.max_file_bytes)
            dirs = service.directions
            source, target = text_field(fields, "source", "auto"), dirs.spelled(text_field(fields, "target"))
            source = dirs.sources[0] if source.lower() == "auto" and len(dirs.sources) == 1 else dirs.spelled(source)
            if target not in dirs.targets(source):
                raise RequestError(400, f"{cut(source)} to {cut(target)} is not a direction this server translates.")
            plan = await read_plan(upload.data, file_format(upload.filename))
            charge(request, service.settings.access, characters(plan))
            result = await translate_plan(service, plan, dirs.target_lang(target), lambda: client_gone(request))
            name = safe_name(upload.filename)
            ident, kept = service.files.add(owner(request), name)
            kept.result, kept.status = result, "done"
            return {"translatedFileUrl": f"{str(request.base_url).rstrip('/')}/download_file/{ident}.{name}"}

        return await answer(request, service, respond, files=1)

    @app.get("/download_file/{name}")
    async def download_file(name: str) -> Response:
        """A translated file by the link /translate_file gave (no key needed: the link's 128 random bits are)."""
        kept = service.files.download(name.split(".", 1)[0])
        if kept is None:
            raise RequestError(404, "there is no such file (a translated file is kept 30 minutes).")
        disposition = f'attachment; filename="{kept.name}"'
        media = mimetypes.guess_type(kept.name)[0] or "application/octet-stream"
        return Response(kept.result, media_type=media, headers={"Content-Disposition": disposition})

    @app.get("/spec")
    async def spec() -> dict[str, Any]:
        """The API of these endpoints as LibreTranslate's /spec describes its own (Swagger 2.0)."""
        return SPEC


def frontend(service: Service) -> dict[str, Any]:
    """GET /frontend/settings in LibreTranslate's shape (no file translation, no suggestions on this server)."""
    dirs = service.directions
    source = dirs.sources[0] if len(dirs.sources) == 1 else "auto"
    target = (dirs.targets(source) or dirs.all_targets or [""])[0]
    named = {
        code: {"code": code, "name": "Auto Detect" if code == "auto" else NAMES.get(code, code)}
        for code in (source, target)
    }
    return {
        "charLimit": service.settings.limits.max_chars,
        "frontendTimeout": 500,
        "apiKeys": service.settings.access.keys.required,
        "keyRequired": service.settings.access.keys.required,
        "suggestions": False,
        "filesTranslation": True,
        "supportedFilesFormat": sorted(SERVED),
        "language": {"source": named[source], "target": named[target]},
    }
