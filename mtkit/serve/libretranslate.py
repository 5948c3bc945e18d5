"""LibreTranslate's API on `mtkit serve`: what Mastodon, libretranslatepy and other LibreTranslate clients send.

`POST /translate` (`q` a string or a list, `source` a code or `auto`, `target`, `format` text or
html, `alternatives`, `api_key`), `GET /languages` and `POST /detect`, as JSON or as a urlencoded
form (libretranslatepy sends forms), answered in LibreTranslate's shapes: `{"translatedText": ...}`,
`[{"code", "name", "targets"}]`, `[{"confidence", "language"}]`, and `{"error": "..."}` with
LibreTranslate's status codes (400 for a bad request, a missing key or a limit passed; 403 for a wrong
key; 500 when decoding failed; mtkit's 503 with Retry-After when busy or loading). A request goes
through the same Host/Origin checks, limits, queue and batcher as mtkit's own /translate. The key may
come in the body (`api_key`), as LibreTranslate's clients send it, or in a header as for mtkit's API.

A form post is accepted here, unlike on mtkit's own endpoints: a web page can send one cross-site
without asking first, but browsers mark it with an `Origin` header, which guard.py refuses unless
allowed with --allow-origin.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import threading
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mtkit.config import DecodeConfig
from mtkit.decode.markup import Markup
from mtkit.errors import MtkitError
from mtkit.serve.payload import Limits, RequestError, check_lines, cut, parse_json

# English names of the codes a client is likely to see (LibreTranslate's /languages says a name); others: the code.
NAMES = {
    "ar": "Arabic", "bg": "Bulgarian", "ca": "Catalan", "cs": "Czech", "da": "Danish", "de": "German",
    "el": "Greek", "en": "English", "es": "Spanish", "et": "Estonian", "fi": "Finnish", "fr": "French",
    "hu": "Hungarian", "it": "Italian", "ja": "Japanese", "ko": "Korean", "lt": "Lithuanian", "lv": "Latvian",
    "nb": "Norwegian Bokmål", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian",
    "ru": "Russian", "sk": "Slovak", "sl": "Slovenian", "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian",
    "zh": "Chinese",
}  # fmt: skip
FIELDS = ("q", "source", "target", "format", "alternatives", "api_key")
NO_LANGUAGES = "this server does not know its model's languages; its operator can name them with --languages en-de."


@dataclass(frozen=True)
class Directions:
    """The language pairs the served model translates; `tokens`: whether it picks its target by a >>xx<< token."""

    pairs: tuple[tuple[str, str], ...]
    tokens: bool = False

    @property
    def sources(self) -> list[str]:
        return list(dict.fromkeys(s for s, _ in self.pairs))

    def targets(self, source: str) -> list[str]:
        return [t for s, t in self.pairs if s == source]

    def languages(self) -> list[dict[str, Any]]:
        """GET /languages: each source with its targets, then the languages that are only targets."""
        codes = list(dict.fromkeys([*self.sources, *(t for _, t in self.pairs)]))
        return [{"code": c, "name": NAMES.get(c, c), "targets": self.targets(c)} for c in codes]


def parse_languages(text: str) -> tuple[tuple[str, str], ...]:
    """`--languages en-de,en-fr`: the pairs, or one sentence on why not."""
    pairs = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        source, sep, target = item.partition("-")
        if not sep or not source.isalnum() or not target.replace("_", "").isalnum():
            raise MtkitError(f"--languages takes pairs like en-de or en-de,en-fr; {item!r} is not one.")
        pairs.append((source.lower(), target))
    if not pairs:
        raise MtkitError("--languages takes pairs like en-de or en-de,en-fr; it was empty.")
    return tuple(pairs)


def directions(given: tuple[tuple[str, str], ...], recorded: Any, language_tokens: dict[str, int]) -> Directions:
    """--languages when given; else the pair the model file records, or its targets' tokens with that source."""
    tokens = bool(language_tokens)
    if given:
        return Directions(given, tokens)
    if isinstance(recorded, (list, tuple)) and len(recorded) == 2 and all(isinstance(x, str) for x in recorded):
        source, target = recorded
        if not tokens:
            return Directions(((source, target),))
        if source != "src":  # a multilingual data directory calls its sides src and tgt: no source known
            return Directions(tuple((source, tok[2:-2]) for tok in language_tokens), True)
    return Directions((), tokens)


class Detector:
    """Language identification among the model's source languages (py3langid, restricted to them)."""

    def __init__(self, languages: list[str]) -> None:
        self.languages = languages
        self._identifier: Any = None
        self._lock = threading.Lock()

    def detect(self, text: str) -> list[dict[str, Any]]:
        """[{"confidence": 0-100, "language": code}], most likely first (one language: it, with 100)."""
        if len(self.languages) < 2:
            return [{"confidence": 100.0, "language": code} for code in self.languages]
        with self._lock:
            if self._identifier is None:
                try:  # py3langid: langid.py's maintained fork, the library `mtkit clean --langid` uses too
                    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier
                except ImportError:
                    raise RequestError(
                        400, "detecting the language needs py3langid: pip install 'mtkit[serve]'."
                    ) from None
                self._identifier = LanguageIdentifier.from_modelpath(f"{MODEL_DIR}/{MODEL_FILE}", norm_probs=True)
                self._identifier.set_languages(self.languages)
            ranked = self._identifier.rank(text)
        return [{"confidence": round(100.0 * p, 1), "language": code} for code, p in ranked]


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


def check_key(fields: dict[str, Any], api_key: str | None, header_ok: bool) -> None:
    """LibreTranslate's answers: no key 400, a wrong key 403 (a header key, mtkit's way, counts too)."""
    if api_key is None or header_ok:
        return
    given = fields.get("api_key")
    if not isinstance(given, str) or not given:
        raise RequestError(400, "this server needs an API key: send it as api_key.")
    if not hmac.compare_digest(given.encode("utf-8", "replace"), api_key.encode("utf-8")):
        raise RequestError(403, "the API key is not valid.")


def text_field(fields: dict[str, Any], name: str, default: str | None = None) -> str:
    value = fields.get(name, default)
    if value is None or value == "":
        raise RequestError(400, f"the request has no {name} parameter.")
    if not isinstance(value, str):
        raise RequestError(400, f"{name} must be a string.")
    return value


def for_target(target: str, dirs: Directions) -> str:
    """The one place the request's target language becomes the translator's `target_lang`: its >>xx<< token,
    where the model has them ("": a model of one pair)."""
    return target if dirs.tokens else ""


@dataclass(frozen=True)
class Request:
    lines: list[str]
    batch: bool
    source: str
    target: str
    html: bool
    alternatives: int


def parse_request(fields: dict[str, Any], dirs: Directions, limits: Limits, is_json: bool) -> Request:
    """The checked fields of a /translate request, in LibreTranslate's order of checks."""
    if "q" not in fields or fields["q"] in ("", None, []):
        raise RequestError(400, "the request has no q parameter (the text to translate).")
    q = fields["q"]
    batch = isinstance(q, list)
    lines = check_lines(q if batch else [q], "q", limits)
    if not is_json:
        lines = ["\n".join(line.splitlines()) for line in lines]
    source, target = text_field(fields, "source", "auto"), text_field(fields, "target")
    fmt = fields.get("format") or "text"
    if fmt not in ("text", "html"):
        raise RequestError(400, f"{cut(str(fmt))} format is not supported; use text or html.")
    try:
        alternatives = int(fields.get("alternatives") or 0)
    except (TypeError, ValueError):
        raise RequestError(400, "alternatives must be a number.") from None
    if not dirs.pairs:
        raise RequestError(400, NO_LANGUAGES)
    if source != "auto" and source not in dirs.sources:
        raise RequestError(400, f"{cut(source)} is not supported as a source; this server translates from "
                           f"{', '.join(dirs.sources)}.")  # fmt: skip
    if target not in {t for _, t in dirs.pairs}:
        known = ", ".join(dict.fromkeys(t for _, t in dirs.pairs))
        raise RequestError(400, f"{cut(target)} is not supported as a target; this server translates into {known}.")
    return Request(lines, batch, source, target, fmt == "html", max(0, alternatives))


Translate = Callable[[list[str], DecodeConfig, str], Awaitable[list[Any]]]  # (lines, config, target_lang)
Align = Callable[[list[tuple[list[str], list[str]]], str], Awaitable[list[list[int | None]] | None]]


async def translate(
    req: Request,
    dirs: Directions,
    detector: Detector,
    default: DecodeConfig,
    limits: Limits,
    run: Translate,
    align: Align,
) -> dict[str, Any]:
    """POST /translate's answer: translatedText (and detectedLanguage, alternatives) as LibreTranslate gives them."""
    detected = None
    if req.source == "auto":  # langid off the event loop: its model takes seconds to load the first time
        detected = await asyncio.to_thread(lambda: [detector.detect(line)[0] for line in req.lines])
    for found in detected or [{"language": req.source}]:
        if req.target not in dirs.targets(found["language"]):
            raise RequestError(400, f"{found['language']} to {req.target} is not a direction this server translates.")
    nbest = req.alternatives + 1
    if nbest > max(limits.max_beam, default.beam):
        raise RequestError(
            400, f"alternatives must be at most {max(limits.max_beam, default.beam) - 1} on this server."
        )
    config = dataclasses.replace(default, nbest=nbest, beam=max(default.beam, nbest))
    target_lang = for_target(req.target, dirs)
    if req.html:
        texts, alternatives = await translate_html(req.lines, config, target_lang, run, align), [[] for _ in req.lines]
    else:
        found = await run(req.lines, config, target_lang)
        texts = [t.text for t in found]
        alternatives = [[text for text, _ in t.hypotheses[1:]] for t in found]
    answer: dict[str, Any] = {"translatedText": texts if req.batch else texts[0]}
    if detected is not None:
        answer["detectedLanguage"] = detected if req.batch else detected[0]
    if req.alternatives > 0:
        answer["alternatives"] = alternatives if req.batch else alternatives[0]
    return answer


async def translate_html(
    lines: list[str], config: DecodeConfig, target_lang: str, run: Translate, align: Align
) -> list[str]:
    """Each fragment's text units translated in one request, the tagged ones aligned, the markup put back
    (mtkit/decode/markup.py's `Markup`, driven by the server's batcher)."""
    try:
        markup = Markup(lines)
    except MtkitError as exc:  # markup nested too deep
        raise RequestError(400, str(exc)) from None
    texts = markup.texts
    found = [t.text for t in await run(texts, dataclasses.replace(config, nbest=1), target_lang)] if texts else []
    pairs = markup.pairs(found)
    links = await align(pairs, target_lang) if pairs else []
    try:
        return markup.render(found, links)
    except MtkitError as exc:  # markup that would not read back in a browser as it was read
        raise RequestError(400, str(exc)) from None
