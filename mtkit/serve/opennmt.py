"""OpenNMT-py's REST API: `POST /translator/translate` with `[{"src": "...", "id": 100}, ...]`, answered with one
list for the request and one entry per source and hypothesis (`src`, `tgt`, `n_best`, `pred_score`)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from mtkit.decode.translator import Translation
from mtkit.serve.http import charge, client_gone, read_body
from mtkit.serve.payload import parse_json, parse_opennmt
from mtkit.serve.service import Service


def opennmt_answer(sources: list[str], translations: list[Translation], nbest: int) -> list[list[dict[str, Any]]]:
    """OpenNMT-py's shape: one list for the request, one entry per source and hypothesis."""
    return [
        [
            {"src": src, "tgt": text, "n_best": nbest, "pred_score": score}
            for src, t in zip(sources, translations)
            for text, score in t.hypotheses
        ]
    ]


def mount(app: FastAPI, service: Service) -> None:
    """OpenNMT-py's endpoint on `app`."""
    limits = service.settings.limits

    @app.post("/translator/translate")
    async def translator_translate(request: Request) -> list[list[dict[str, Any]]]:
        sources = parse_opennmt(parse_json(await read_body(request, limits.max_body_bytes)), limits)
        charge(request, service.settings.access, sum(map(len, sources)))
        decode = service.defaults
        return opennmt_answer(
            sources, await service.translate(sources, decode, lambda: client_gone(request)), decode.nbest
        )
