"""Request bodies checked by hand: every mistake gets one sentence and its own HTTP status.

Written out rather than left to pydantic models so that a client sees one plain sentence
("text must be a list of strings") instead of a list of validation records, and so that
invalid UTF-8 and lone surrogates, which a JSON parser accepts, are refused before decoding.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass
from typing import Any

from mtkit.config import ConfigError, DecodeConfig

# The decoding settings a request may choose for itself (the rest stay the server's).
REQUEST_OPTIONS = ("beam", "alpha", "lenpen", "max_len_a", "max_len_b", "nbest", "target_lang")
# What else mtkit's request may say, read by its adapter (mtkit/serve/native.py): terms to enforce, a rating asked for.
REQUEST_EXTRAS = ("glossary", "glossary_id", "confidence")
# The most a request may ask of each numeric setting (beam and nbest: Limits.max_beam); the server's own
# value is always allowed. Unbounded, alpha = 1e308 overflows the length penalty and max_len_b = 10**30
# the length tensor (a 500), and a large max_len_a x source length keeps one request decoding for hours.
OPTION_MAX: dict[str, float] = {"alpha": 10.0, "max_len_a": 4.0, "max_len_b": 512}
SHOWN_CHARS = 40  # a value quoted back in an error message is cut to this


class RequestError(Exception):
    """A bad request: the HTTP status and the one sentence that says what is wrong."""

    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after


class Busy(RequestError):
    """503 with Retry-After: the queue is full, or a request waited past --request-timeout undecoded. An API whose
    clients expect another status for a busy server (LibreTranslate's and DeepL's 429) answers with that."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(503, message, retry_after)


@dataclass(frozen=True)
class Limits:
    """What one request may ask for; past them the answer is 413 (size) or 422 (beam)."""

    max_lines: int = 64
    max_chars: int = 16384
    max_beam: int = 16
    max_file_bytes: int = 10 * 2**20  # a file to translate (LibreTranslate's /translate_file, DeepL's /v2/document)

    @property
    def max_body_bytes(self) -> int:
        """Generous room for JSON escapes (\\uXXXX is 6 bytes a character) and per-line overhead."""
        return 6 * self.max_chars + 256 * self.max_lines + 4096


def cut(text: str) -> str:
    """Text quoted back in an error message, cut short: a client's 100 kB string is not echoed back."""
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def show(value: Any) -> str:
    """A value as JSON for an error message, cut short."""
    try:
        return cut(json.dumps(value))
    except (ValueError, RecursionError):
        return type(value).__name__


def parse_json(body: bytes) -> Any:
    """The request body as JSON, or 400 with why not (422 for JSON nested or numbered past Python's limits)."""
    if not body.strip():
        raise RequestError(400, "the request body is empty; send a JSON document.")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(400, f"the request body is not valid UTF-8 (byte {exc.start}).") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RequestError(
            400, f"the request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}."
        ) from None
    except RecursionError:
        raise RequestError(422, "the request body nests arrays or objects too deeply to read.") from None
    except ValueError:  # Python reads integers of up to 4300 digits (sys.get_int_max_str_digits)
        raise RequestError(422, "the request body holds a number too long to read (over 4300 digits).") from None


def check_lines(lines: Any, name: str, limits: Limits) -> list[str]:
    """A non-empty list of strings, each encodable as UTF-8, within the request limits."""
    if not isinstance(lines, list) or not all(isinstance(s, str) for s in lines):
        raise RequestError(422, f"{name} must be a list of strings.")
    if not lines:
        raise RequestError(422, f"{name} is an empty list; send at least one sentence.")
    for i, line in enumerate(lines):
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:
            raise RequestError(422, f"{name}[{i}] is not valid Unicode (a lone surrogate escape).") from None
    if len(lines) > limits.max_lines:
        raise RequestError(413, f"{len(lines)} sentences in one request; the limit is {limits.max_lines}.")
    chars = sum(map(len, lines))
    if chars > limits.max_chars:
        raise RequestError(413, f"{chars} characters in one request; the limit is {limits.max_chars}.")
    return lines


def _type_ok(value: Any, kind: Any) -> bool:
    if isinstance(value, bool):
        return False
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


# DecodeConfig's field types, resolved once at import: typing.get_type_hints took about 50 us a call, every request.
DECODE_HINTS = typing.get_type_hints(DecodeConfig)


def request_config(options: dict[str, Any], default: DecodeConfig, limits: Limits) -> DecodeConfig:
    """The server's settings with the request's own choices laid over them, checked as the CLI checks them."""
    options = {k: v for k, v in options.items() if k != "target_lang"}  # the request's direction, not a search setting
    for name, value in options.items():
        if not _type_ok(value, DECODE_HINTS[name]):
            raise RequestError(422, f"{name} must be of type {DECODE_HINTS[name].__name__}, got {show(value)}.")
        if name in OPTION_MAX and not value <= max(OPTION_MAX[name], getattr(default, name)):
            bound = max(OPTION_MAX[name], getattr(default, name))
            raise RequestError(422, f"{name} must be at most {bound:g} on this server, got {show(value)}.")
    if options.get("beam", 0) > max(limits.max_beam, default.beam):
        raise RequestError(
            422, f"beam {options['beam']} is more than this server allows ({max(limits.max_beam, default.beam)})."
        )
    try:
        return dataclasses.replace(default, **options)
    except ConfigError as exc:
        raise RequestError(422, f"{exc.name} must be {exc.expected}, got {show(exc.value)}.") from None


def parse_translate(data: Any, default: DecodeConfig, limits: Limits) -> tuple[list[str], DecodeConfig, str | None]:
    """`{"text": [...], "beam": 4, "target_lang": "fr", ...}`: the lines, the decoding settings for them, and their
    target language (None: the server's; the translator checks it). REQUEST_EXTRAS are left to the caller."""
    if not isinstance(data, dict):
        raise RequestError(422, 'the request must be a JSON object like {"text": ["A sentence."]}.')
    unknown = sorted(set(data) - {"text", *REQUEST_OPTIONS, *REQUEST_EXTRAS})
    if unknown:
        named = ", ".join(cut(name) for name in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        known = ", ".join(("text", *REQUEST_OPTIONS, *REQUEST_EXTRAS))
        raise RequestError(422, f"unknown field(s) {named}; known: {known}.")
    if "text" not in data:
        raise RequestError(422, 'the request has no "text" field (a list of sentences).')
    lines = check_lines(data["text"], "text", limits)
    target_lang = data.get("target_lang")
    if target_lang is not None and not isinstance(target_lang, str):
        raise RequestError(422, f"target_lang must be of type str, got {show(target_lang)}.")
    options = {k: v for k, v in data.items() if k != "text" and k not in REQUEST_EXTRAS}
    return lines, request_config(options, default, limits), target_lang


def parse_opennmt(data: Any, limits: Limits) -> list[str]:
    """OpenNMT-py's REST format, `[{"src": "...", "id": 100}, ...]`: the sources in order.

    `id` names a model in OpenNMT-py's server config; this server holds one, so any integer is taken.
    """
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise RequestError(422, 'the request must be a JSON list like [{"src": "A sentence.", "id": 100}].')
    if not data:
        raise RequestError(422, "the request is an empty list; send at least one sentence.")
    for i, item in enumerate(data):
        if "src" not in item:
            raise RequestError(422, f'item {i} has no "src" field.')
        if "id" in item and (isinstance(item["id"], bool) or not isinstance(item["id"], int)):
            raise RequestError(422, f'item {i}: "id" must be an integer (a model id), got {show(item["id"])}.')
    sources = [item["src"] for item in data]
    if not all(isinstance(s, str) for s in sources):
        raise RequestError(422, 'every "src" must be a string.')
    return check_lines(sources, "src", limits)
