"""mtkit's own API: `POST /translate` with `{"text": [...], "beam": 4, "target_lang": "fr", ...}`, answered with
`{"translations", "scores", "model"}` (and `nbest`). Its bodies must be JSON (mtkit/serve/http.py), its key comes in
a header (guard.py), and each mistake is one sentence with mtkit's status codes (mtkit/serve/payload.py)."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from mtkit.decode.translator import Translation
from mtkit.serve.guard import NEEDS_KEY
from mtkit.serve.http import authorize, charge, client_gone, key_ok
from mtkit.serve.payload import RequestError, parse_translate
from mtkit.serve.service import Service


def translate_answer(translations: list[Translation], nbest: int, model: str) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "translations": [t.text for t in translations],
        "scores": [t.score for t in translations],
        "model": model,
    }
    if nbest > 1:
        answer["nbest"] = [[{"text": text, "score": score} for text, score in t.hypotheses] for t in translations]
    return answer


async def translate(request: Request, service: Service, data: Any) -> dict[str, Any]:
    """POST /translate with mtkit's body, `data` (already read and parsed as JSON: app.py's /translate)."""
    access = service.settings.access
    if not key_ok(request, access):
        raise RequestError(401, NEEDS_KEY)
    authorize(request, access)
    lines, config, target_lang = parse_translate(data, service.defaults, service.settings.limits)
    charge(request, access, sum(map(len, lines)))
    translations = await service.translate(lines, config, lambda: client_gone(request), target_lang)
    return translate_answer(translations, config.nbest, service.settings.name)
