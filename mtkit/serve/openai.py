"""An OpenAI-compatible endpoint on `mtkit serve`: translation requests as LLM-era tools send them (the official
`openai` client with `base_url`, open-webui, subtitle translators), answered by the translation model.

    POST /v1/chat/completions   messages (the text: the last user message), model, stream
    GET  /v1/models             one model id per direction: mtkit-en-de
    GET  /v1/models/{id}

The direction comes from the model id (`mtkit-en-de`, `en-de`) or from the prompt: a system or user
message that names the target language ("Translate into German", "... to de"); a model of one
target language needs only the word "translate". When the last user message holds the instruction
too, the text is what follows it (after its colon, or its first line; a "Source Text: ...
Translated Text:" wrapper is unwrapped). Each line of the text is translated, empty lines kept.
The answer is a `chat.completion` (or, with `stream`, `chat.completion.chunk` server-sent events
ending with `data: [DONE]`); its `usage` counts words, not tokens. What this endpoint does not do is
refused with OpenAI's error shape (`{"error": {"message", "type", "param", "code"}}`): free chat (no
target language named), tools, n > 1. Keys: `Authorization: Bearer KEY`, one of the server's keys.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from mtkit.serve.http import NoKey, authorize, charge, client_gone, read_body
from mtkit.serve.keys import OverLimit
from mtkit.serve.languages import NAMES, Directions, translatable
from mtkit.serve.payload import Busy, RequestError, check_lines, cut, parse_json
from mtkit.serve.service import Service

PREFIX = "mtkit-"
NO_CHAT = (
    "this endpoint translates and does not chat: name the direction in the model (such as {example}; see GET "
    "/v1/models) or the target language in the prompt ('Translate into German')."
)
INSTRUCTION = re.compile(r"\btranslat", re.IGNORECASE)
TARGET = re.compile(r"\b(?:to|into)\s+([A-Za-z][A-Za-z_-]*)", re.IGNORECASE)
WRAPPED = re.compile(r"Source Text:\s*(.*?)\s*(?:Translated Text:\s*)?$", re.IGNORECASE | re.DOTALL)


def error(
    status: int, message: str, code: str | None = None, param: str | None = None, retry_after: int | None = None
) -> JSONResponse:
    """OpenAI's error body, `{"error": {"message", "type", "param", "code"}}`, with its status."""
    kind = "server_error" if status >= 500 else "rate_limit_error" if status == 429 else "invalid_request_error"
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse(body, status_code=status, headers=headers)


def model_ids(dirs: Directions, name: str) -> list[str]:
    """One id a direction; a model whose languages are unknown: its name (the direction then from the prompt)."""
    return [f"{PREFIX}{s}-{t}" for s, t in dirs.pairs] or [name]


def direction_of_model(model: str, dirs: Directions) -> tuple[str, str] | None:
    """(source, target) that a model id such as mtkit-en-de or en-de names, if one of the model's directions."""
    source, sep, target = model.removeprefix(PREFIX).partition("-")
    if not sep:
        return None
    pair = (dirs.spelled(source), dirs.spelled(target))
    return pair if pair in dirs.pairs else None


def named_target(text: str, dirs: Directions) -> str | None:
    """The target language a prompt names after "to" or "into", by its English name or its code."""
    by_name = {NAMES.get(t.lower(), t).lower(): t for t in dirs.all_targets}
    for match in TARGET.finditer(text):
        word = match.group(1).lower()
        if word in by_name:
            return by_name[word]
        if dirs.spelled(word) in dirs.all_targets:
            return dirs.spelled(word)
    return None


def content(message: dict[str, Any]) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    value = message.get("content")
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    raise RequestError(400, "a message's content must be a string or a list of text parts.")


def the_text(message: str) -> str:
    """The text to translate in a user message that may hold the instruction too."""
    wrapped = WRAPPED.search(message)
    if wrapped:
        return wrapped.group(1)
    first, newline, rest = message.partition("\n")
    if not INSTRUCTION.search(first):
        return message
    head, colon, after = first.partition(":")
    if colon and after.strip():
        return after.strip() + (newline + rest if rest else "")
    return rest.strip("\n") if newline else message


@dataclasses.dataclass(frozen=True)
class Chat:
    model: str
    text: str
    target: str
    stream: bool


def parse_chat(data: Any, dirs: Directions) -> Chat:
    """The checked request: which model, the text, its target language, whether to stream."""
    if not isinstance(data, dict):
        raise RequestError(400, "the request must be a JSON object with model and messages.")
    model, messages = data.get("model"), data.get("messages")
    if not isinstance(model, str) or not model:
        raise RequestError(400, "the request has no model (see GET /v1/models).")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise RequestError(400, "messages must be a non-empty list of {role, content} objects.")
    if data.get("tools") or data.get("functions"):
        raise RequestError(400, "tools and functions are not supported: this endpoint only translates.")
    if data.get("n", 1) != 1:
        raise RequestError(400, "n must be 1: this endpoint gives one translation a request.")
    users = [m for m in messages if m.get("role") == "user"]
    if not users:
        raise RequestError(400, "the messages hold no user message (the text to translate).")
    last = content(users[-1])
    prompt = "\n".join(content(m) for m in messages if m.get("role") in ("system", "developer")) + "\n" + last
    pair = direction_of_model(model, dirs)
    target = pair[1] if pair else named_target(prompt, dirs)
    if target is None and len(dirs.all_targets) == 1 and INSTRUCTION.search(prompt):
        target = dirs.all_targets[0]
    if target is None and not dirs.pairs and INSTRUCTION.search(prompt):
        target = ""  # a model whose languages nobody named: it translates into its one target
    if target is None:
        example = model_ids(dirs, "mtkit")[0]
        raise RequestError(400, NO_CHAT.format(example=example))
    text = last if pair is not None and not INSTRUCTION.search(last) else the_text(last)
    return Chat(model, text, target, bool(data.get("stream")))


def completion(chat: Chat, translation: str, ident: str, created: int) -> dict[str, Any]:
    words = len(chat.text.split()), len(translation.split())
    return {
        "id": ident,
        "object": "chat.completion",
        "created": created,
        "model": chat.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": translation},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": words[0], "completion_tokens": words[1], "total_tokens": sum(words)},
    }


async def events(chat: Chat, translation: str, ident: str, created: int) -> AsyncIterator[str]:
    """The answer as server-sent events: the role, the translation, the stop, then [DONE]."""
    head = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": chat.model}
    for delta, finish in (({"role": "assistant", "content": ""}, None), ({"content": translation}, None), ({}, "stop")):
        chunk = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
        yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
    yield "data: [DONE]\n\n"


async def chat_completions(request: Request, service: Service) -> Any:
    """POST /v1/chat/completions."""
    data = parse_json(await read_body(request, service.settings.limits.max_body_bytes))
    authorize(request, service.settings.access)
    if not service.ready:
        raise RequestError(503, "the model is still loading; retry shortly.", retry_after=1)
    chat = parse_chat(data, service.directions)
    if not chat.text.strip():
        raise RequestError(400, "the last user message has no text to translate.")
    lines = chat.text.split("\n")
    todo = [k for k, line in enumerate(lines) if translatable(line)]  # blank, emoji only: kept as they are
    if todo:
        check_lines([lines[k] for k in todo], "the text's lines", service.settings.limits)
        charge(request, service.settings.access, sum(len(lines[k]) for k in todo))
        config = dataclasses.replace(service.defaults, nbest=1)
        target_lang = service.directions.target_lang(chat.target) if chat.target else ""
        found = await service.translate([lines[k] for k in todo], config, lambda: client_gone(request), target_lang)
        for k, t in zip(todo, found):
            lines[k] = t.text
    translation, ident, created = "\n".join(lines), f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    if chat.stream:
        return StreamingResponse(events(chat, translation, ident, created), media_type="text/event-stream")
    return completion(chat, translation, ident, created)


def mount(app: FastAPI, service: Service) -> None:
    """The OpenAI-compatible endpoints on `app`; every refusal in OpenAI's error shape."""

    async def answered(request: Request, work: Any) -> Any:
        try:
            return await work()
        except NoKey:
            return error(401, "Incorrect API key provided: send one of this server's keys as a Bearer token.",
                         "invalid_api_key")  # fmt: skip
        except OverLimit as exc:
            code = "insufficient_quota" if exc.quota else "rate_limit_exceeded"
            return error(429, exc.message, code, retry_after=exc.retry_after)
        except Busy as exc:
            return error(429, exc.message, "rate_limit_exceeded", retry_after=exc.retry_after)
        except RequestError as exc:
            status = 400 if exc.status in (413, 415, 422) else exc.status
            return error(status, exc.message, None, "messages" if status == 400 else None, exc.retry_after)

    @app.post("/v1/chat/completions")
    async def v1_chat_completions(request: Request) -> Any:
        return await answered(request, lambda: chat_completions(request, service))

    def listed() -> list[dict[str, Any]]:
        if not service.ready:
            raise RequestError(503, "the model is still loading; retry shortly.", retry_after=1)
        ids = model_ids(service.directions, service.settings.name)
        return [{"id": i, "object": "model", "created": 0, "owned_by": "mtkit"} for i in ids]

    @app.get("/v1/models")
    async def v1_models(request: Request) -> Any:
        async def models() -> Any:
            authorize(request, service.settings.access)
            return {"object": "list", "data": listed()}

        return await answered(request, models)

    @app.get("/v1/models/{model}")
    async def v1_model(request: Request, model: str) -> Any:
        async def one() -> Any:
            authorize(request, service.settings.access)
            for described in listed():
                if described["id"] == model:
                    return described
            raise RequestError(404, f"The model {cut(model)!r} does not exist here; see GET /v1/models.")

        return await answered(request, one)
