"""mtkit's own API: `POST /translate` with `{"text": [...], "beam": 4, "target_lang": "fr", ...}`, answered with
`{"translations", "scores", "model"}` (and `nbest`). Its bodies must be JSON (mtkit/serve/http.py), its key comes in
a header (guard.py), and each mistake is one sentence with mtkit's status codes (mtkit/serve/payload.py).

A request may bring a glossary whose terms are enforced: its own entries (`"glossary": {"source": "target"}` or a
list of pairs: mtkit/serve/glossaries.py's `inline`) or a glossary its key made at DeepL's `/v2/glossaries`
(`"glossary_id"`), and ask for each translation's `confidence` (`"confidence": true`: `"confidences"` in the answer).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from mtkit.decode.encode import target_language
from mtkit.decode.glossary import Glossary
from mtkit.decode.translator import Translation
from mtkit.errors import MtkitError
from mtkit.serve.glossaries import inline
from mtkit.serve.guard import NEEDS_KEY
from mtkit.serve.http import authorize, charge, client_gone, key_ok, owner
from mtkit.serve.payload import RequestError, cut, parse_translate, show
from mtkit.serve.service import Service


def translate_answer(
    translations: list[Translation], nbest: int, model: str, confidence: bool = False
) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "translations": [t.text for t in translations],
        "scores": [t.score for t in translations],
        "model": model,
    }
    if nbest > 1:
        answer["nbest"] = [[{"text": text, "score": score} for text, score in t.hypotheses] for t in translations]
    if confidence:
        answer["confidences"] = [t.confidence for t in translations]
    return answer


def glossary_of(request: Request, service: Service, data: dict[str, Any], target_lang: str | None) -> Glossary | None:
    """The request's glossary: its own entries, or the key's glossary named by `glossary_id` (404 when the key has
    none by that id), whose language pair must be the request's (422); None without either."""
    if "glossary" in data and "glossary_id" in data:
        raise RequestError(422, "send glossary (the entries) or glossary_id (a stored glossary), not both.")
    if "glossary" in data:
        return inline(data["glossary"])
    if "glossary_id" not in data:
        return None
    ident = data["glossary_id"]
    if not isinstance(ident, str) or not ident:
        raise RequestError(422, f"glossary_id must be a glossary's id (a string), got {show(ident)}.")
    if not service.ready:
        raise RequestError(503, "the model is still loading; retry shortly.", retry_after=1)
    stored = service.glossaries.get(owner(request), ident)
    if stored is None:
        raise RequestError(404, f"this key has no glossary {cut(ident)!r} (GET /v2/glossaries lists its glossaries).")
    dirs = service.directions
    try:  # the request's target language, as the translator will read it ("": a model of one pair)
        code = target_language(service.vocab, service.settings.target_lang if target_lang is None else target_lang)
    except MtkitError as exc:
        raise RequestError(422, str(exc)) from None
    if (dirs.spelled(code) != stored.target) if code else ((stored.source, stored.target) not in dirs.pairs):
        raise RequestError(
            422,
            f"glossary {cut(ident)!r} is {stored.source}-{stored.target}, not this request's language pair: use a "
            "glossary made for it.",
        )
    return stored.terms


async def translate(request: Request, service: Service, data: Any) -> dict[str, Any]:
    """POST /translate with mtkit's body, `data` (already read and parsed as JSON: app.py's /translate)."""
    access = service.settings.access
    if not key_ok(request, access):
        raise RequestError(401, NEEDS_KEY)
    authorize(request, access)
    lines, config, target_lang = parse_translate(data, service.defaults, service.settings.limits)
    confidence = data.get("confidence", False)
    if not isinstance(confidence, bool):
        raise RequestError(422, f"confidence must be true or false, got {show(confidence)}.")
    glossary = glossary_of(request, service, data, target_lang)
    charge(request, access, sum(map(len, lines)))
    translations = await service.translate(
        lines, config, lambda: client_gone(request), target_lang, glossary=glossary, confidence=confidence
    )
    return translate_answer(translations, config.nbest, service.settings.name, confidence)
